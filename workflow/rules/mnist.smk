# Study 1: data -> mixture -> train -> approximants -> metrics -> ablation.
# Each rule runs `polyinterp <rule>`; its input/output keys are the step function's arguments.


rule mnist_data:
    output:
        data="results/data/mnist.npz",
    params: **step_args("mnist_data", lambda wc: config["mnist"]["data"])
    log: log_path("mnist/data")
    priority: 10  # it gates mnist_train (below)
    resources:
        mem_mb=2000,
        runtime=15,
    conda: CONDA_ENV
    shell: STEP


rule mnist_mixture:
    input:
        data=rules.mnist_data.output.data,
    output:
        mixture="results/mnist/mixture.pt",
    params: **step_args("mnist_mixture", lambda wc: {k: config["mnist"][k] for k in ("preprocess", "mixture")})
    log: log_path("mnist/mixture")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=4000,
        runtime=15,
    conda: CONDA_ENV
    shell: STEP


rule mnist_solver_plan:
    input:
        mixture=rules.mnist_mixture.output.mixture,
    output:
        plan="results/mnist/solver_plan.pt",
    params:
        **step_args("mnist_solver_plan", lambda wc: {
            # only the keys of the chosen basis, so that the other's keys do not rebuild the plan
            **{k: config["mnist"]["approx"][k] for k in ("jd_basis", "deflation_steps", "coarse_ritz", "coarse_rank")
               + {"newton": ("jd_newton_iterations",), "jacobi": ("jd_sweeps", "jd_logdet_sweeps"),
                  "identity": ()}[config["mnist"]["approx"]["jd_basis"]]},
            "device": DEVICE,
        }),
    log: log_path("mnist/solver_plan")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=4000,
        runtime=30,
        gpu=1,
    conda: CONDA_ENV
    shell: STEP


rule mnist_train:
    input:
        data=rules.mnist_data.output.data,
    output:
        ckpt=[mnist_ckpt(step=s) for s in MNIST_STEPS],
    params:
        **step_args("mnist_train", lambda wc: {
            **train_params(MODELS[wc.model].train),
            **MODELS[wc.model].arch_params(),
            "preprocess": config["mnist"]["preprocess"],
            "seed": int(wc.seed),
            "steps": MNIST_STEPS,
            "device": DEVICE,
        }),
    log: log_path("mnist/{model}/train_seed{seed}")
    threads: 1  # a 784-256-10 step at batch 64 is compute-bound on one core; one seed trains beside other jobs
    # The longest chain of the DAG (training, then every checkpoint's fits, metrics and attack) starts
    # first: without a priority the scheduler fills both cores with the cubic study's jobs for minutes
    # before any seed trains (the paper config's run of ba2ddd6 started training 8 min in).
    priority: 10
    resources:
        mem_mb=4000,
        runtime=240,
        gpu=1,
    conda: CONDA_ENV
    shell: STEP


rule mnist_approximants:
    input:
        ckpt=mnist_ckpt(),
        mixture=rules.mnist_mixture.output.mixture,
        plan=rules.mnist_solver_plan.output.plan,
        warm=previous_approx,
    output:
        approx=mnist_approx(),
    params:
        **step_args("mnist_approximants", lambda wc: {
            **{k: config["mnist"]["approx"][k] for k in ("tol", "max_iter", "inner_dtype", "fits")},
            "sgd": sgd_settings(config["mnist"]["approx"]["sgd"], int(wc.step), SGD_STEPS),
            "device": DEVICE,
        }),
    log: log_path("mnist/{model}/approx_seed{seed}_step{step}")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=6000,
        runtime=30,
        gpu=1,
    conda: CONDA_ENV
    shell: STEP


rule mnist_degree_approximants:
    input:
        ckpt=mnist_ckpt(),
        mixture=rules.mnist_mixture.output.mixture,
        data=rules.mnist_data.output.data,
        warm=previous_degree_approx,
    output:
        approx=mnist_degree_approx(),
        metrics=mnist_file("degrees/metrics_step{step}.parquet"),
    params:
        **step_args("mnist_degree_approximants", lambda wc: {
            **{k: v for k, v in config["mnist"]["approx"]["cubic"].items() if k != "checkpoints"},
            "degrees": config["mnist"]["approx"]["degrees"],
            "mixture_samples": config["mnist"]["metrics"]["mixture_samples"],
            "device": DEVICE,
        }),
    log: log_path("mnist/{model}/degrees_seed{seed}_step{step}")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=8000,
        runtime=60,
        gpu=1,
    conda: CONDA_ENV
    shell: STEP


rule mnist_metrics:
    input:
        ckpt=mnist_ckpt(),
        approx=mnist_approx(),
        mixture=rules.mnist_mixture.output.mixture,
        data=rules.mnist_data.output.data,
    output:
        metrics=mnist_file("metrics/step{step}.parquet"),
    params: **step_args("mnist_metrics", lambda wc: {**config["mnist"]["metrics"], "device": DEVICE})
    log: log_path("mnist/{model}/metrics_seed{seed}_step{step}")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=8000,
        runtime=30,
        gpu=1,
    conda: CONDA_ENV
    shell: STEP


rule mnist_metrics_all:
    input:
        parts=expand(rules.mnist_metrics.output.metrics, model=MODEL_NAMES, seed=SEEDS, step=ANALYSIS_STEPS)
        + expand(rules.mnist_degree_approximants.output.metrics, model=MODEL_NAMES, seed=DEGREE_SEEDS,
                 step=DEGREE_STEPS),
    output:
        metrics="results/mnist/metrics.parquet",
    params: **step_args("mnist_metrics_all")
    log: log_path("mnist/metrics_all")
    resources:
        mem_mb=2000,
        runtime=10,
    conda: CONDA_ENV
    shell: STEP


rule mnist_degree_summary:
    input:
        metrics=rules.mnist_metrics_all.output.metrics,
    output:
        table="results/mnist/fvu_by_degree.parquet",
        markdown=report("results/mnist/fvu_by_degree.md", caption="../report/fvu_by_degree.rst", category="Tables"),
    params: **step_args("mnist_degree_summary")
    log: log_path("mnist/degree_summary")
    resources: **TABLE_JOB
    conda: CONDA_ENV
    shell: STEP


if DEGREE_STEPS:  # the higher-degree fits are in the run
    ALL_TARGETS.extend(rules.mnist_degree_summary.output)


rule mnist_svd_ablation:
    input:
        ckpt=mnist_ckpt(),
        approx=mnist_approx(),
        mixture=rules.mnist_mixture.output.mixture,
        data=rules.mnist_data.output.data,
    output:
        table=mnist_file("ablation/step{step}.parquet"),
    params:
        **step_args("mnist_svd_ablation", lambda wc: {
            **{k: config["mnist"]["ablation"][k] for k in ("bases", "k_max", "random_draws")},
            "device": DEVICE,
        }),
    log: log_path("mnist/{model}/svd_ablation_seed{seed}_step{step}")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=4000,
        runtime=30,
    conda: CONDA_ENV
    shell: STEP


rule mnist_svd_ablation_all:
    input:
        parts=expand(rules.mnist_svd_ablation.output.table, seed=SEEDS, step=ABLATION_STEPS, allow_missing=True),
        ckpt=[mnist_ckpt(seed=SEEDS[0], step=t) for t in ABLATION_STEPS],
        approx=[mnist_approx(seed=SEEDS[0], step=t) for t in ABLATION_STEPS],
        mixture=rules.mnist_mixture.output.mixture,
        data=rules.mnist_data.output.data,
    output:
        table="results/mnist/{model}/svd_ablation.parquet",
        examples="results/mnist/{model}/svd_ablation_examples.pt",
    params:
        **step_args("mnist_svd_ablation_all", lambda wc: {
            **{k: config["mnist"]["ablation"][k] for k in ("bases", "k_max", "figure_steps", "accuracy_level")},
            "device": DEVICE,
        }),
    log: log_path("mnist/{model}/svd_ablation_all")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=4000,
        runtime=15,
    conda: CONDA_ENV
    shell: STEP


rule mnist_attack_summary:
    input:
        tables=expand(rules.mnist_svd_ablation_all.output.table, model=MODEL_NAMES),
    output:
        summary="results/mnist/attack_strength.parquet",
        markdown=report("results/mnist/attack_strength.md", caption="../report/attack_strength.rst", category="Tables"),
    params: **step_args("mnist_attack_summary")
    log: log_path("mnist/attack_summary")
    resources: **TABLE_JOB
    conda: CONDA_ENV
    shell: STEP


ALL_TARGETS.extend(rules.mnist_attack_summary.output)


rule mnist_early_fvu:
    input:
        ckpts=[mnist_ckpt(step=t) for t in EARLY_FVU_STEPS],
        approx=[mnist_approx(step=t) for t in EARLY_FVU_STEPS],
        mixture=rules.mnist_mixture.output.mixture,
        data=rules.mnist_data.output.data,
    output:
        table=mnist_file("early_fvu.parquet"),
    params: **step_args("mnist_early_fvu", lambda wc: {"train": MODELS[wc.model].train, "device": DEVICE})
    log: log_path("mnist/{model}/early_fvu_seed{seed}")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=4000,
        runtime=15,
    conda: CONDA_ENV
    shell: STEP


rule mnist_early_fvu_summary:
    input:
        tables=expand(rules.mnist_early_fvu.output.table, model=MODEL_NAMES, seed=SEEDS),
    output:
        summary="results/mnist/early_fvu.parquet",
        markdown=report("results/mnist/early_fvu.md", caption="../report/early_fvu.rst", category="Tables"),
    params: **step_args("mnist_early_fvu_summary")
    log: log_path("mnist/early_fvu_summary")
    resources: **TABLE_JOB
    conda: CONDA_ENV
    shell: STEP


ALL_TARGETS.extend(rules.mnist_early_fvu_summary.output)
