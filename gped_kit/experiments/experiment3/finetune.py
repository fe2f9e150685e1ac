"""Fine-tuning a pruned student on fixed targets (paper 003, Appendix A.2: after pruning, the
student is fine-tuned with the learning rate restarted).

**Design.** A pruned student needs the teacher to be fine-tuned. Rather than run the chain again,
it is fine-tuned on the chain's stored U_o Monte Carlo estimates (Eq. 10): the running means
``g_hat_i`` over D' that Algorithm 1 kept for a U_o student of the same target (every Experiment 3
student uses U_o, or has a U_o companion, so the store exists; students sharing (H, M') hold
identical stores; :meth:`gped_kit.engine.GPEDResult.store`). It takes Adam steps on minibatches of M'
visited D' examples (drawn with replacement, seeded, on the device, no host synchronisation), with
the target's loss, i.e. distillation continued with the estimates frozen at the end of the chain.
The schedule follows A.2: the learning rate restarts at 1e-4 (FCNN) / 1e-3 (CNN)
(:attr:`~gped_kit.experiments.paper.PaperModel.finetune_lr`); the length is given in teacher epochs
(600 MNIST, 800 CIFAR-10; :data:`~gped_kit.experiments.paper.FINETUNE_EPOCHS`) as for the student's
halving schedule, one epoch being N/M SGLD steps with one student step every H of them, i.e.
``epochs * (N / M) / H`` student steps (3,600 for MNIST at N = 60,000, M = 100, H = 100).

The optimiser is the kit's own Adam (:mod:`gped_kit.core.adam`), the one Algorithm 1's students are
trained with, so distillation and fine-tuning take the same update.
"""

from __future__ import annotations

import torch
from torch import nn

from ...core.adam import adam_init, adam_update_, bias_corrections
from ...core.options import check_int, check_positive
from ...core.targets import Target, resolve_target


def finetune(net: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, target: str | Target, steps: int,
             lr: float, batch_size: int = 100, lr_halving_steps: int | None = None, seed: int = 0,
             noise_std: float = 0.0) -> nn.Module:
    """Fine-tune ``net`` in place on fixed targets (Appendix A.2's fine-tuning after pruning).

    ``inputs`` (n, C, H, W) and ``targets`` (n, D) are D' examples and their U_o estimates
    ``g_hat_i`` (:meth:`gped_kit.engine.GPEDResult.store`); every step draws ``batch_size`` of them with replacement
    (a seeded generator on the device; nothing is read back to the host), optionally adds the
    BDK input noise, and takes one Adam step (:func:`gped_kit.core.adam.adam_update_`, the
    students' optimiser in Algorithm 1) on the mean of ``target``'s loss (cross-entropy
    for the predictive distribution, absolute error for the entropy). The learning rate starts
    at ``lr`` and is halved every ``lr_halving_steps`` steps (None: constant)."""
    target = resolve_target(target)
    check_int("finetune steps", steps, 0)
    check_positive("finetune lr", lr)
    check_int("finetune batch_size", batch_size, 1)
    if lr_halving_steps is not None:
        check_int("finetune lr_halving_steps", lr_halving_steps, 1)
    if inputs.shape[0] != targets.shape[0] or inputs.shape[0] < 1:
        raise ValueError(f"finetune: inputs ({inputs.shape[0]}) and targets ({targets.shape[0]}) must be "
                         "non-empty and of equal length")
    device = inputs.device
    gen = torch.Generator(device).manual_seed(int(seed))
    params = dict(net.named_parameters())
    state = adam_init(params)
    rates = {}  # the learning rate of each halving period, a 0-d tensor on the device
    net.train()
    for step in range(steps):
        period = step // lr_halving_steps if lr_halving_steps is not None else 0
        if period not in rates:
            rates[period] = torch.tensor(lr * 0.5 ** period, device=device)
        idx = torch.randint(inputs.shape[0], (batch_size,), device=device, generator=gen)
        x = inputs[idx]
        if noise_std > 0:
            x = x + noise_std * torch.randn(x.shape, device=device, generator=gen)
        loss = target.loss(targets[idx], net(x)).mean()
        grads = dict(zip(params, torch.autograd.grad(loss, list(params.values()))))
        adam_update_(params, grads, state, rates[period], *bias_corrections(step + 1))
    net.eval()
    return net
