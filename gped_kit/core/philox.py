"""Counter-based random numbers: Philox-4x32-10 in tensor operations, keyed by (seed, step, position).

A counter-based generator (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2,
3", SC 2011) is a keyed bijection of a counter: the draw for a given (key, counter) is a pure function
of them, with no state to advance, save or share. So every chain of a batch can draw its noise for
step t in one kernel over the batch's ``(K, P)`` buffer, each element from its own counter, and chain
k's draws are the same whichever chains share its batch, on any device. The engine uses them with
``GPEDConfig(random_numbers="counter")``: minibatch indices and the sampler's noise, each stream keyed by
the seed its generator would have had.

**Philox-4x32-10.** A counter of four 32-bit words ``(c0, c1, c2, c3)`` and a key of two
``(k0, k1)`` go through ten rounds of::

    (hi0, lo0) = A * c0,   (hi1, lo1) = B * c2          (32 x 32 -> 64-bit products, high and low words)
    (c0, c1, c2, c3) <- (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
    (k0, k1) <- (k0 + W0, k1 + W1)  mod 2^32

with ``A = 0xD2511F53``, ``B = 0xCD9E8D57`` and the Weyl increments ``W0 = 0x9E3779B9``,
``W1 = 0xBB67AE85``; the four output words are uniform 32-bit integers. Random123's known answers
hold (``tests/test_counter_random.py``). The words are held in int64 tensors (values in [0, 2^32)), and each
product is formed from the 16-bit halves of its constant so that no intermediate exceeds 2^49: the
same integers on every device and in compiled code, where int64 overflow is not defined alike.

**Standard normals.** A word ``x`` gives the uniform ``u = (floor(x / 2^8) + 1/2) / 2^24`` in (0, 1],
formed in float32: exact below 1/2; from 1/2 up, where float32's spacing is 2^-24, the half rounds to even,
so the largest words give ``u = 1`` (probability 2^-25, a normal draw of exactly 0). Never 0, so the
logarithm is finite. Each pair of uniforms gives two
standard normals by the Box-Muller transform ``r cos(2 pi u2)``, ``r sin(2 pi u2)`` with
``r = sqrt(-2 log u1)``. :func:`counter_normal` gives element e of step t under key k from the
counter ``(floor(e / 4), t, 0, 0)``: one Philox call makes four consecutive elements.

**Indices.** :func:`counter_indices` gives position i of step t an index into a set of n elements from
word ``x`` of the same counter layout (word ``i mod 4`` of counter ``(floor(i / 4), t, 0, 0)``) as
``floor(x n / 2^32)``: uniform up to ``n / 2^32`` (below 1.4e-5 for n = 60,000), like ``torch.randint``'s
draws with replacement.

:func:`counter_normal_` and :func:`counter_indices_` write the draws into a given buffer, so that under
``torch.compile`` (:class:`~gped_kit.core.fused.Fused`) a draw is one kernel.
"""

from __future__ import annotations

import math

import torch

#: Philox-4x32's round multipliers and Weyl key increments (Salmon et al., 2011).
MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
WEYL = (0x9E3779B9, 0xBB67AE85)
#: Rounds of the generator (Philox-4x32-10: ten, the crush-resistant choice of the paper).
ROUNDS = 10
WORD = 0xFFFFFFFF
#: Uniform bits a word contributes (a float32 holds 24 exactly).
UNIFORM_BITS = 24

Words = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _mul_hi_lo(a: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The high and low 32-bit words of ``a * m`` for words ``a`` (int64 in [0, 2^32)) and a 32-bit
    constant ``m``, from ``m``'s 16-bit halves (every intermediate below 2^49)."""
    low = a * (m & 0xFFFF)
    high = a * (m >> 16)
    hi = (high + (low >> 16)) >> 16
    lo = (low + ((high & 0xFFFF) << 16)) & WORD
    return hi, lo


def philox4x32(counter: Words, key: tuple[torch.Tensor | int, torch.Tensor | int], rounds: int = ROUNDS) -> Words:
    """Philox-4x32 (module docstring) of ``counter`` (four int64 tensors of 32-bit words, broadcast
    together) under ``key`` (two words, tensors or ints): four int64 tensors of uniform 32-bit words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(rounds):
        hi0, lo0 = _mul_hi_lo(c0, MULTIPLIERS[0])
        hi1, lo1 = _mul_hi_lo(c2, MULTIPLIERS[1])
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + WEYL[0]) & WORD, (k1 + WEYL[1]) & WORD
    return c0, c1, c2, c3


def uniform(word: torch.Tensor) -> torch.Tensor:
    """The float32 uniform in (0, 1] of 32-bit words: ``(floor(x / 2^8) + 1/2) / 2^24``, rounded to float32 (1
    for the largest words: the module docstring)."""
    return ((word >> (32 - UNIFORM_BITS)).to(torch.float32) + 0.5) * (2.0 ** -UNIFORM_BITS)


def key_words(seeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The two key words of non-negative int64 ``seeds`` (low and high 32 bits), shaped as given."""
    return seeds & WORD, (seeds >> 32) & WORD


def _counters(keys: torch.Tensor, step: torch.Tensor, num: int) -> Words:
    """The four words of counters ``(b, t, 0, 0)``, b = 0 .. ceil(num / 4) - 1, under each row's key, ``(K, B)``
    each."""
    if keys.dim() != 2 or keys.shape[1] != 2:
        raise ValueError(f"counter-based draws: keys must be (K, 2) key words, got shape {tuple(keys.shape)}")
    blocks = torch.arange((num + 3) // 4, dtype=torch.int64, device=keys.device)
    zero = torch.zeros_like(blocks)
    t = step.reshape(()) & WORD
    return philox4x32((blocks, zero + t, zero, zero), (keys[:, :1], keys[:, 1:]))


def counter_normal(keys: torch.Tensor, step: torch.Tensor, num: int) -> torch.Tensor:
    """Standard normals of shape ``(K, num)``: row k, element e is the draw of counter
    ``(floor(e / 4), t, 0, 0)`` under key ``keys[k]`` (module docstring).

    ``keys`` is ``(K, 2)`` int64 (the key words, :func:`key_words`), ``step`` the step t as an int64
    tensor of one element (a device value: a CUDA graph replays it with each period's t)."""
    u0, u1, u2, u3 = (uniform(x) for x in _counters(keys, step, num))
    r0, r1 = torch.sqrt(-2.0 * torch.log(u0)), torch.sqrt(-2.0 * torch.log(u2))
    a0, a1 = (2.0 * math.pi) * u1, (2.0 * math.pi) * u3
    four = torch.stack([r0 * torch.cos(a0), r0 * torch.sin(a0), r1 * torch.cos(a1), r1 * torch.sin(a1)], dim=-1)
    return four.reshape(keys.shape[0], -1)[:, :num]


def counter_indices(keys: torch.Tensor, step: torch.Tensor, num: int, sizes: torch.Tensor) -> torch.Tensor:
    """Indices of shape ``(K, num)``, row k in ``[0, sizes[k])``: position i of step t is ``floor(x n / 2^32)``
    for word ``i mod 4`` of counter ``(floor(i / 4), t, 0, 0)`` under ``keys[k]`` (module docstring).
    ``sizes`` is ``(K, 1)`` int64 (each row's n <= 2^31)."""
    words = torch.stack(_counters(keys, step, num), dim=-1).reshape(keys.shape[0], -1)[:, :num]
    return (words * sizes) >> 32


def counter_normal_(out: torch.Tensor, keys: torch.Tensor, step: torch.Tensor) -> None:
    """:func:`counter_normal` of ``out``'s shape ``(K, P)`` written into ``out``."""
    out.copy_(counter_normal(keys, step, out.shape[1]))


def counter_indices_(out: torch.Tensor, keys: torch.Tensor, step: torch.Tensor, sizes: torch.Tensor) -> None:
    """:func:`counter_indices` of ``out``'s shape ``(K, M)`` written into ``out``."""
    out.copy_(counter_indices(keys, step, out.shape[1], sizes))


__all__ = ["MULTIPLIERS", "WEYL", "ROUNDS", "philox4x32", "uniform", "key_words", "counter_normal", "counter_indices",
           "counter_normal_", "counter_indices_"]
