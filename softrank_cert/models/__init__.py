"""Real attention operators from real checkpoints (UNTRUSTED front end; numpy + safetensors,
``tokenizers`` for text, no torch at run time).

* :class:`BertModel` -- float64 numpy forward of a BERT encoder (all-MiniLM-L6-v2 via
  ``"minilm"``, or any BERT checkpoint folder); yields per layer and head the exact ``Q``, ``K``
  of ``A = softmax_rows(Q K^T / sqrt(head_dim))`` (operator kind ``qk``, ``beta="inv_sqrt_d"``).
* :func:`build_panel` / :func:`write_panel` -- npz panels ``M/D/w<width>/L<l>H<h>/{Q,K}`` with
  ``M/D/w<width>/tokens`` and a ``__provenance__`` JSON object.

Width convention: ``[CLS] + first w-2 word pieces of the document + [SEP]`` = exactly ``w`` ids.
"""

from .bert import BertModel, BertOutput
from .common import MINILM, minilm_dir, resolve_model
from .panel import PROVENANCE_KEY, build_panel, operator_names, write_panel

__all__ = [
    "BertModel",
    "BertOutput",
    "MINILM",
    "PROVENANCE_KEY",
    "build_panel",
    "minilm_dir",
    "operator_names",
    "resolve_model",
    "write_panel",
]
