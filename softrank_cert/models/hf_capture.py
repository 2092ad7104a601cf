"""Attention operators captured through transformers' own modeling code (UNTRUSTED front end).

torch and transformers (the ``[hf]`` extra) are imported only here, on first use
(:func:`require_hf`); a missing extra is one :class:`~softrank_cert.errors.InvalidInputError`
line naming the install command (exit 2).

How the capture works.  Modern transformers models dispatch every attention call through the
registry ``transformers.AttentionInterface``: the attention module computes ``query`` and ``key``
(projections, biases, q/k norms, RoPE or any other position scheme already applied) and calls
``ALL_ATTENTION_FUNCTIONS[config._attn_implementation](module, query, key, value,
attention_mask, scaling=..., dropout=..., **kwargs)``.  :func:`capture_attention` registers
:func:`_capture_attention` under the name :data:`CAPTURE_IMPLEMENTATION` (with transformers' eager
mask builder, so every mask is materialised), switches the model to it for one forward pass and
back, and records per attention call (``layer`` = call order, 0-based):

* ``q`` (heads, n, d) and ``k`` (kv_heads, n, d): float64, exactly the tensors the attention
  receives; query head ``h`` reads key head ``h // (heads / kv_heads)`` (``repeat_kv``);
* ``scaling``: the float the scores ``query @ key^T`` are multiplied by (transformers' eager
  default ``d ** -0.5`` when the module passes none);
* ``mask``: ``"none"`` (no mask, or a mask that blocks nothing) or ``"causal"`` (the mask blocks
  exactly the entries ``j > i``: checked entry by entry against the causal pattern);
* ``softcap``: Gemma-2-style logit soft-capping ``S = c * tanh(scaling * Q K^T / c)``; then
  ``scores`` holds those float64 logits, computed with the same torch operations as the
  model's eager attention.

and then calls the model file's own ``eager_attention_forward`` with the same arguments, so the
model runs unchanged.  The probabilities that eager attention returns are compared with
``softmax(scaling * Q K^T + mask)`` (or ``softmax(S + mask)``) computed from the record, entry
by entry, within what a float32 softmax of those logits can differ by (:func:`float32_allowance`:
many model files run the eager softmax in float32 even in a float64 model); a larger difference
means the model's attention is not one this record describes, and the capture is refused.

Refused with one line (exit 2), never approximated: a model not in float64; more than one
sequence; a mask other than none / causal (padding, a sliding window narrower than the
sequence, an additive bias such as ALiBi); attention sinks (``s_aux``); cross-attention
(query and key lengths differ); dropout in training mode; a model whose attention does not go
through the registry (nothing captured).
"""

from __future__ import annotations

import math
import re
import sys
import threading
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from ..errors import InvalidInputError
from .common import selection

#: The name under which the capturing attention function is registered.
CAPTURE_IMPLEMENTATION = "softrank_capture"
#: Unit roundoff of float32 (the eager softmax of many model files runs in float32).
FLOAT32_UNIT = 2.0 ** -24
#: Absolute allowance for probabilities a float32 softmax flushes to zero (below 2**-126).
FLOAT32_UNDERFLOW = 2.0 ** -120
INSTALL_HINT = ("pip install torch==2.13.0 && pip install -e '.[hf]' in the softrank-cert checkout (CPU build of torch elsewhere: "
                "pip install torch --index-url https://download.pytorch.org/whl/cpu)")


#: Oldest transformers with what the capture uses (``AttentionInterface``, ``AttentionMaskInterface``,
#: ``set_attn_implementation``, ``from_pretrained(dtype=...)``).
MIN_TRANSFORMERS = (4, 56)


def require_hf() -> tuple[Any, Any]:
    """``(torch, transformers)``, or a one-line InvalidInputError naming the install command."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise InvalidInputError(f"the Hugging Face path needs torch and transformers ({exc}): {INSTALL_HINT}") from None
    found = tuple(int(part) for part in re.findall(r"\d+", transformers.__version__)[:2])
    if found < MIN_TRANSFORMERS:
        raise InvalidInputError(f"the Hugging Face path needs transformers >= {'.'.join(map(str, MIN_TRANSFORMERS))} "
                                f"(found {transformers.__version__}): pip install -U -e '.[hf]' in the softrank-cert checkout")
    return torch, transformers


@dataclass(frozen=True)
class AttentionRecord:
    """One attention call of one forward pass (module docstring): ``q`` (heads, n, d), ``k``
    (kv_heads, n, d), ``scores`` (heads, n, n) when soft-capped, else None."""

    layer: int
    module: str
    q: np.ndarray
    k: np.ndarray
    scaling: float
    mask: str
    softcap: float | None
    scores: np.ndarray | None

    @property
    def heads(self) -> int:
        return self.q.shape[0]

    def kv_head(self, head: int) -> int:
        """The key head that query head ``head`` reads (grouped-query attention)."""
        return head // (self.q.shape[0] // self.k.shape[0])

    @property
    def inv_sqrt_d(self) -> bool:
        """True when ``scaling`` is ``head_dim ** -0.5`` (the operator's exact ``1/sqrt(d)``)."""
        d = self.q.shape[2]
        return self.scaling in (d ** -0.5, 1.0 / math.sqrt(d))


class _StopForward(Exception):
    """Raised after the last wanted layer: the rest of the forward pass is not needed."""


class _Session:
    """The state of one capture: wanted layers, call counter, records, module names."""

    def __init__(self, layers: set[int] | None, names: dict[int, str]) -> None:
        self.layers, self.names = layers, names
        self.last = None if layers is None else max(layers)
        self.calls = 0
        self.records: list[AttentionRecord] = []


_ACTIVE = threading.local()


def _refuse(layer: int, message: str) -> InvalidInputError:
    return InvalidInputError(f"layer {layer}: {message}")


def _eager_of(module: Any) -> Callable:
    """The model file's own eager attention (``eager_attention_forward`` of the module's file)."""
    eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if eager is None:
        raise InvalidInputError(f"{type(module).__name__}: its modeling file has no eager_attention_forward to run")
    return eager


def _mask_kind(torch: Any, mask: Any, n: int, module: Any, kwargs: Mapping[str, Any], layer: int) -> tuple[str, Any]:
    """``("none" | "causal", allowed)``: what ``mask`` blocks, checked entry by entry."""
    if mask is None:
        if getattr(module, "is_causal", False) and n > 1:
            raise _refuse(layer, "a causal attention module received no mask, so eager attention would not be causal")
        return "none", None
    if mask.dim() != 4 or mask.shape[0] != 1 or tuple(mask.shape[-2:]) != (n, n):
        raise _refuse(layer, f"attention mask of shape {list(mask.shape)} (expected [1, heads or 1, {n}, {n}])")
    if mask.dtype == torch.bool:
        allowed = mask[0]
    else:
        allowed = mask[0] == 0
        if not bool((mask[0][~allowed] <= torch.finfo(mask.dtype).min / 2).all()):
            raise _refuse(layer, "the attention mask adds a finite bias to the scores (ALiBi, relative positions...): "
                                 "the kernel's masks are none and causal")
    if bool(allowed.all()):
        return "none", allowed
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    if bool((allowed == causal).all()):
        return "causal", allowed
    window = kwargs.get("sliding_window") or getattr(module, "sliding_window", None)
    if window:
        raise _refuse(layer, f"sliding-window attention of {window} tokens is narrower than the width {n}: the kernel's "
                             f"masks are none and causal; choose widths <= {window} or other layers")
    raise _refuse(layer, "the attention mask is neither none nor causal (padding or a custom pattern): "
                         "pass one unpadded sequence")


def _scores(torch: Any, query: Any, key: Any, scaling: float, softcap: float | None) -> Any:
    """``scaling * Q K^T`` (soft-capped), with the eager attention's own torch operations."""
    rep = query.shape[1] // key.shape[1]
    if rep > 1:
        key = key[:, :, None].expand(key.shape[0], key.shape[1], rep, *key.shape[2:]).reshape(
            key.shape[0], key.shape[1] * rep, *key.shape[2:])
    s = torch.matmul(query, key.transpose(2, 3)) * scaling
    if softcap is not None:
        s = torch.tanh(s / softcap) * softcap
    return s


def _examine(torch: Any, module: Any, query: Any, key: Any, mask: Any, scaling: Any, dropout: float,
             kwargs: Mapping[str, Any], session: _Session, layer: int) -> tuple[AttentionRecord, Any, Any]:
    """The record of one attention call, the probabilities it implies (torch, 1 x heads x n x n)
    and their :func:`float32_allowance`."""
    if query.dtype != torch.float64 or key.dtype != torch.float64:
        raise _refuse(layer, f"query/key are {query.dtype}, not float64: load the model with dtype=torch.float64")
    if query.dim() != 4 or key.dim() != 4 or query.shape[0] != 1 or key.shape[0] != 1:
        raise _refuse(layer, f"query {list(query.shape)} / key {list(key.shape)}: capture takes one sequence "
                             "(batch size 1) with (batch, heads, n, d) tensors")
    heads, n, d = query.shape[1:]
    kv_heads, n_keys, d_key = key.shape[1:]
    if getattr(module, "is_cross_attention", False) or n_keys != n:
        raise _refuse(layer, f"cross-attention ({n} queries, {n_keys} keys): only self-attention is captured")
    if d_key != d or heads % kv_heads:
        raise _refuse(layer, f"{heads} query heads of dimension {d} cannot read {kv_heads} key heads of dimension {d_key}")
    if kwargs.get("s_aux") is not None or getattr(module, "sinks", None) is not None:
        raise _refuse(layer, "attention sinks (s_aux) add a virtual key to every softmax row: not expressible yet")
    if dropout and getattr(module, "training", False):
        raise _refuse(layer, "attention dropout is active: put the model in eval() mode")
    if scaling is None:
        scaling = d ** -0.5
    scaling = float(scaling.item() if hasattr(scaling, "item") else scaling)
    if not math.isfinite(scaling):
        raise _refuse(layer, f"the attention scaling {scaling!r} is not finite")
    softcap = kwargs.get("softcap")
    softcap = None if softcap is None else float(softcap)
    if softcap is not None and not (math.isfinite(softcap) and softcap > 0):
        raise _refuse(layer, f"logit soft-cap {softcap!r} is not a positive number")
    kind, allowed = _mask_kind(torch, mask, n, module, kwargs, layer)
    scores = _scores(torch, query, key, scaling, softcap)
    masked = scores if allowed is None else scores.masked_fill(~allowed, -math.inf)
    probs = torch.softmax(masked, dim=-1)
    record = AttentionRecord(
        layer=layer, module=session.names.get(id(module), type(module).__name__),
        q=query[0].detach().cpu().numpy().copy(), k=key[0].detach().cpu().numpy().copy(), scaling=scaling, mask=kind,
        softcap=softcap, scores=None if softcap is None else scores[0].detach().cpu().numpy().copy())
    return record, probs, float32_allowance(torch, masked, probs)


def float32_allowance(torch: Any, scores: Any, probs: Any) -> Any:
    """Per entry, how far a float32 softmax of the float64 logits ``scores`` (masked entries
    ``-inf``) can be from their float64 softmax ``probs``: ``expm1(u (6 M_i + n + 16)) p_ij`` plus
    :data:`FLOAT32_UNDERFLOW`, with ``u`` = :data:`FLOAT32_UNIT`, ``M_i`` the largest allowed
    ``|s_ij|`` of row ``i`` and ``n`` the row length.

    Rounding the logits to float32 moves each by at most ``u M_i`` and subtracting the row
    maximum adds at most ``2 u M_i``: every ``exp`` argument is off by at most ``3 u M_i``, so
    ``p_ij = e_ij / sum_k e_ik`` changes relatively by at most ``6 u M_i`` (first order); the
    float32 ``exp`` (a few ulp), the sum of ``n`` terms (``(n - 1) u``) and the normalisation
    (two roundings) add ``(n + 16) u`` relative; ``expm1`` of the sum bounds their product.
    The allowance grows with the logits: 1e-4 is float32 rounding at logits of a few hundred,
    not at the 12,861 of Qwen2.5-1.5B's layer 0."""
    finite = torch.isfinite(scores)
    reach = torch.where(finite, scores.abs(), torch.zeros_like(scores)).amax(dim=-1, keepdim=True)
    return torch.expm1(FLOAT32_UNIT * (6 * reach + scores.shape[-1] + 16)) * probs + FLOAT32_UNDERFLOW


def _capture_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, scaling: Any = None,
                       dropout: float = 0.0, **kwargs: Any) -> Any:
    """The registered attention function: record (module docstring), then run the eager attention."""
    eager = _eager_of(module)
    session: _Session | None = getattr(_ACTIVE, "session", None)
    if session is None:  # the implementation is only switched on inside capture_attention
        return eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    import torch

    layer = session.calls
    session.calls += 1
    wanted = session.layers is None or layer in session.layers
    probs: Any  # with allowance: tensors whenever record is set
    allowance: Any
    record, probs, allowance = (_examine(torch, module, query, key, attention_mask, scaling, dropout, kwargs,
                                         session, layer) if wanted else (None, None, None))
    out = eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    if record is not None:
        weights = out[1] if isinstance(out, tuple) and len(out) > 1 else None
        if weights is None or tuple(weights.shape) != tuple(probs.shape):
            raise _refuse(layer, "the eager attention returned no probabilities to check the record against")
        gap = (weights.to(torch.float64) - probs).abs()
        if not bool((gap <= allowance).all()):
            worst = int((gap - allowance).argmax())
            raise _refuse(layer, f"the model's eager attention differs from softmax(scaling * Q K^T + mask) by "
                                 f"{float(gap.flatten()[worst]):.3g} where float32 rounding allows "
                                 f"{float(allowance.flatten()[worst]):.3g}: its attention is not one the kernel expresses")
        session.records.append(record)
    if session.last is not None and layer >= session.last:
        raise _StopForward
    return out


def _register(transformers: Any) -> None:
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    transformers.AttentionInterface.register(CAPTURE_IMPLEMENTATION, _capture_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(CAPTURE_IMPLEMENTATION, eager_mask)


def _model_inputs(torch: Any, model: Any, inputs: Any) -> dict[str, Any]:
    """``inputs`` as keyword arguments of ``model``: a mapping (tokenizer / image-processor
    output), or a tensor / array of input ids; floating tensors are widened to float64."""
    if isinstance(inputs, Mapping):
        items = dict(inputs)
    elif isinstance(inputs, (torch.Tensor, np.ndarray, list, tuple)):
        ids = torch.as_tensor(np.asarray(inputs) if not isinstance(inputs, torch.Tensor) else inputs)
        if ids.dtype.is_floating_point:
            raise InvalidInputError("token ids must be integers; pass pixel values as {'pixel_values': ...}")
        items = {"input_ids": ids[None] if ids.dim() == 1 else ids}
    else:
        raise InvalidInputError(f"capture() takes a mapping of model inputs or a tensor of input ids, "
                                f"not {type(inputs).__name__}")
    out: dict[str, Any] = {}
    for name, value in items.items():
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        if isinstance(value, torch.Tensor):
            if value.dim() == 0 or value.shape[0] != 1:
                raise InvalidInputError(f"input {name} has shape {list(value.shape)}: capture takes one sequence "
                                        "(batch size 1)")
            if value.dtype.is_floating_point:
                value = value.to(torch.float64)
        out[name] = value
    if not out:
        raise InvalidInputError("capture() got no model inputs")
    return out


def _attention_configs(model: Any) -> list[Any]:
    """Every config object of the model (the model's own and those of sub-models)."""
    configs: dict[int, Any] = {}
    for sub in model.modules():
        config = getattr(sub, "config", None)
        if config is not None and hasattr(config, "_attn_implementation_internal"):
            configs[id(config)] = config
    return list(configs.values())


def capture_attention(model: Any, inputs: Any, layers: Iterable[int] | None = None) -> list[AttentionRecord]:
    """Run ``model`` once on ``inputs`` with the capturing attention and return the records of
    the attention calls ``layers`` (call order, 0-based; all when None), in order.

    ``model``: a loaded transformers model in float64 (``dtype=torch.float64``); it is put in
    eval mode for the pass and its attention implementation, eval/train mode and outputs are
    restored afterwards.  Raises InvalidInputError (one line) on anything refused (module docstring).
    """
    torch, transformers = require_hf()
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "set_attn_implementation"):
        raise InvalidInputError(f"capture() needs a loaded transformers model, not {type(model).__name__}")
    wanted = None if layers is None else {int(v) for v in layers}
    if wanted is not None and (not wanted or min(wanted) < 0):
        raise InvalidInputError("layers must be a non-empty selection of attention layers (0-based)")
    kwargs = _model_inputs(torch, model, inputs)
    _register(transformers)
    configs = _attention_configs(model)
    before = [config._attn_implementation_internal for config in configs]
    was_training = model.training
    session = _Session(wanted, {id(m): name for name, m in model.named_modules()})
    try:
        try:
            model.set_attn_implementation(CAPTURE_IMPLEMENTATION)
        except (ValueError, KeyError, AttributeError, NotImplementedError) as exc:
            raise InvalidInputError(f"{type(model).__name__} cannot switch its attention implementation: {exc}") from None
        model.eval()
        _ACTIVE.session = session
        try:
            with torch.no_grad():
                model(**kwargs)
        except _StopForward:
            pass
        except (TypeError, ValueError, RuntimeError, IndexError) as exc:
            raise InvalidInputError(f"the model's forward pass failed: {' '.join(str(exc).split())[:300]}") from None
    finally:
        _ACTIVE.session = None
        for config, value in zip(configs, before):
            config._attn_implementation_internal = value
        model.train(was_training)
    if not session.records:
        raise InvalidInputError(f"no attention call of {type(model).__name__} went through transformers' "
                                "AttentionInterface: this model cannot be captured")
    if wanted is not None and len(session.records) != len(wanted):
        found = sorted(r.layer for r in session.records)
        raise InvalidInputError(f"layers {sorted(wanted - set(found))} do not exist (the model made {session.calls} "
                                "attention calls)")
    return session.records


def record_operator(record: AttentionRecord, head: int) -> Any:
    """The exact operator of query head ``head`` of ``record``: ``qk`` with ``beta`` the exact
    ``1/sqrt(d)`` when ``scaling == d ** -0.5``, else the exact decimal of the float ``scaling``;
    ``scores`` (the model's float64 soft-capped logits) when soft-capped; mask as recorded."""
    from ..kernel import Operator

    causal = record.mask == "causal"
    if record.scores is not None:
        return Operator.from_scores(record.scores[head], causal=causal)
    return Operator.from_qk(record.q[head], record.k[record.kv_head(head)],
                            beta=None if record.inv_sqrt_d else record.scaling, causal=causal)


def record_notes(record: AttentionRecord, head: int) -> dict[str, Any]:
    """Provenance of one head: layer, head, kv_head, module, scaling (repr), beta, mask, softcap."""
    notes: dict[str, Any] = {"layer": record.layer, "head": head, "kv_head": record.kv_head(head),
                             "module": record.module, "scaling": repr(record.scaling), "mask": record.mask}
    if record.softcap is not None:
        notes["softcap"] = repr(record.softcap)
    else:
        notes["beta"] = "inv_sqrt_d" if record.inv_sqrt_d else repr(record.scaling)
    return notes


def select_heads(records: list[AttentionRecord], heads: Iterable[int] | None) -> list[int]:
    """Sorted distinct query heads present in every record (all of them when None)."""
    return selection(heads, min(r.heads for r in records), "heads")
