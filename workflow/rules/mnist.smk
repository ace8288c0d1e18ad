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
        "{POLYINTERP} mnist-data --out {output:q} --params {params.p:q} > {log:q} 2>&1"


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
        "{POLYINTERP} mnist-mixture --data {input.data:q} --out {output:q}"
        " --params {params.p:q} --threads {threads} > {log:q} 2>&1"


def mnist_ckpt(seed="{seed}", step="{step}"):
    return f"results/mnist/seed{seed}/ckpt/step{step}.pt"


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
        "{POLYINTERP} mnist-train --data {input.data:q} --out {output:q}"
        " --params {params.p:q} --threads {threads} > {log:q} 2>&1"


ALL_TARGETS.extend(
    [rules.mnist_mixture.output[0]]
    + [mnist_ckpt(seed=s, step=MNIST_STEPS[-1]) for s in SEEDS]
)
