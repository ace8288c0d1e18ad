"""The MNIST study's steps: rule name → step function (``polyinterp <rule>``, see :mod:`polyinterp.cli`)."""

STEPS = {
    "mnist_data": "polyinterp.mnist.data:data_step",
    "mnist_mixture": "polyinterp.mnist.mixture:mixture_step",
    "mnist_solver_plan": "polyinterp.mnist.approximants:solver_plan_step",
    "mnist_train": "polyinterp.mnist.train:train_step",
    "mnist_approximants": "polyinterp.mnist.approximants:approximants_step",
    "mnist_degree_approximants": "polyinterp.mnist.degree_approximants:degree_approximants_step",
    "mnist_metrics": "polyinterp.mnist.metrics:metrics_step",
    "mnist_metrics_all": "polyinterp.mnist.metrics:metrics_all_step",
    "mnist_degree_summary": "polyinterp.mnist.degree_summary:degree_summary_step",
    "mnist_svd_ablation": "polyinterp.mnist.ablation:ablation_step",
    "mnist_svd_ablation_all": "polyinterp.mnist.ablation:ablation_all_step",
    "mnist_attack_summary": "polyinterp.mnist.attack_summary:attack_summary_step",
}
