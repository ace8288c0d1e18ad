# Study 1: data -> mixture -> train -> approximants -> metrics -> ablation.


rule mnist_data:
    output:
        "results/data/mnist.npz",
    params:
        p=lambda wc: step_params(config["mnist"]["data"]),
    log:
        log_path("mnist/data"),
    benchmark:
        bench_path("mnist/data")
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        CONDA_ENV
    shell:
        "polyinterp mnist-data --out {output:q} --params {params.p:q} > {log:q} 2>&1"


rule mnist_mixture:
    input:
        data=rules.mnist_data.output[0],
    output:
        "results/mnist/mixture.pt",
    params:
        p=lambda wc: step_params(
            {k: config["mnist"][k] for k in ("preprocess", "mixture")}
        ),
    log:
        log_path("mnist/mixture"),
    benchmark:
        bench_path("mnist/mixture")
    threads: 2
    resources:
        mem_mb=4000,
        runtime=15,
    conda:
        CONDA_ENV
    shell:
        "polyinterp mnist-mixture --data {input.data:q} --out {output:q}"
        " --params {params.p:q} --threads {threads} > {log:q} 2>&1"


rule mnist_solver_plan:
    input:
        mixture=rules.mnist_mixture.output[0],
    output:
        "results/mnist/solver_plan.pt",
    params:
        p=lambda wc: step_params(config["mnist"]["approx"]),
    log:
        log_path("mnist/solver_plan"),
    benchmark:
        bench_path("mnist/solver_plan")
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        CONDA_ENV
    shell:
        "polyinterp mnist-solver-plan --mixture {input.mixture:q} --out {output:q}"
        " --params {params.p:q} --threads {threads} > {log:q} 2>&1"


rule mnist_train:
    input:
        data=rules.mnist_data.output[0],
    output:
        [mnist_ckpt(step=s) for s in MNIST_STEPS],
    params:
        p=lambda wc: step_params(
            config["mnist"]["train"],
            preprocess=config["mnist"]["preprocess"],
            seed=int(wc.seed),
            steps=MNIST_STEPS,
        ),
    log:
        log_path("mnist/train_seed{seed}"),
    benchmark:
        bench_path("mnist/train_seed{seed}")
    threads: 2
    resources:
        mem_mb=4000,
        runtime=240,
        gpu=1,
    conda:
        CONDA_ENV
    shell:
        "polyinterp mnist-train --data {input.data:q} --out {output:q}"
        " --params {params.p:q} --threads {threads} > {log:q} 2>&1"


rule mnist_approximants:
    input:
        ckpt=mnist_ckpt(),
        mixture=rules.mnist_mixture.output[0],
        plan=rules.mnist_solver_plan.output[0],
        warm=previous_approx,
    output:
        mnist_approx(),
    params:
        p=lambda wc: step_params(config["mnist"]["approx"]),
        warm=lambda wc, input: f"--warm-start {input.warm[0]!r}" if input.warm else "",
    log:
        log_path("mnist/approx_seed{seed}_step{step}"),
    benchmark:
        bench_path("mnist/approx_seed{seed}_step{step}")
    threads: 2
    resources:
        mem_mb=6000,
        runtime=30,
        gpu=1,
    conda:
        CONDA_ENV
    shell:
        "polyinterp mnist-approximants --ckpt {input.ckpt:q} --mixture {input.mixture:q} --plan {input.plan:q}"
        " {params.warm} --out {output:q} --params {params.p:q} --threads {threads} > {log:q} 2>&1"


rule mnist_metrics:
    input:
        ckpt=mnist_ckpt(),
        approx=mnist_approx(),
        mixture=rules.mnist_mixture.output[0],
        data=rules.mnist_data.output[0],
    output:
        "results/mnist/seed{seed}/metrics/step{step}.parquet",
    params:
        p=lambda wc: step_params(config["mnist"]["metrics"]),
    log:
        log_path("mnist/metrics_seed{seed}_step{step}"),
    benchmark:
        bench_path("mnist/metrics_seed{seed}_step{step}")
    threads: 2
    resources:
        mem_mb=8000,
        runtime=30,
        gpu=1,
    conda:
        CONDA_ENV
    shell:
        "polyinterp mnist-metrics --ckpt {input.ckpt:q} --approx {input.approx:q}"
        " --mixture {input.mixture:q} --data {input.data:q} --out {output:q}"
        " --params {params.p:q} --threads {threads} > {log:q} 2>&1"


rule mnist_metrics_all:
    input:
        expand(rules.mnist_metrics.output[0], seed=SEEDS, step=MNIST_STEPS),
    output:
        "results/mnist/metrics.parquet",
    log:
        log_path("mnist/metrics_all"),
    benchmark:
        bench_path("mnist/metrics_all")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        "polyinterp mnist-metrics-all --inputs {input:q} --out {output:q} > {log:q} 2>&1"


rule mnist_svd_ablation:
    input:
        ckpt=[mnist_ckpt(s, t) for s in SEEDS for t in ABLATION_STEPS],
        approx=[mnist_approx(s, t) for s in SEEDS for t in ABLATION_STEPS],
        data=rules.mnist_data.output[0],
    output:
        table="results/mnist/svd_ablation.parquet",
        examples="results/mnist/svd_ablation_examples.pt",
    params:
        p=lambda wc: step_params(config["mnist"]["ablation"]),
    log:
        log_path("mnist/svd_ablation"),
    benchmark:
        bench_path("mnist/svd_ablation")
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    conda:
        CONDA_ENV
    shell:
        "polyinterp mnist-svd-ablation --ckpt {input.ckpt:q} --approx {input.approx:q}"
        " --data {input.data:q} --out {output.table:q} --examples {output.examples:q}"
        " --params {params.p:q} --threads {threads} > {log:q} 2>&1"
