# Test-only workflow for tests/cluster/test_retry.py: one job that fails on its first attempt and
# one that always fails, each recording the SLURM job id of every attempt.
rule all:
    input:
        "out/flaky.txt",
        "out/broken.txt",


rule flaky:
    output:
        "out/flaky.txt",
    log:
        "out/logs/flaky.log",
    resources:
        mem_mb=200,
        runtime=5,
        attempt_no=lambda wildcards, attempt: attempt,
    shell:
        "echo ${{SLURM_JOB_ID:-none}} >> out/flaky.attempts; "
        "echo 'attempt {resources.attempt_no}' > {log}; "
        "if [ {resources.attempt_no} -lt 2 ]; then echo 'failing on purpose' >> {log}; exit 3; fi; "
        "echo ok > {output}"


rule broken:
    output:
        "out/broken.txt",
    log:
        "out/logs/broken.log",
    resources:
        mem_mb=200,
        runtime=5,
    shell:
        "echo ${{SLURM_JOB_ID:-none}} >> out/broken.attempts; "
        "echo 'broken on purpose (SLURM job '${{SLURM_JOB_ID:-none}}')' > {log}; exit 7"
