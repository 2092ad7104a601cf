"""The commands of ``softrank``: each one's module and its line in the command list.

``softrank_cert.cli.main`` builds the full parser of the command a command line names and only the
list line of every other one, so that ``softrank --help``, ``softrank CMD --help`` and a refused
argument import one command module at most (and no study, solver, scipy or matplotlib)."""

from __future__ import annotations

#: name -> (the module of ``softrank_cert.cli`` whose ``add_NAME(sub)`` builds its parser, the help line),
#: in the order of the command list.
COMMANDS: dict[str, tuple[str, str]] = {
    "keygen": ("keys", "create an Ed25519 signing key (did:key)"),
    "sign": ("keys", "sign (or re-sign) a certificate with eddsa-jcs-2022"),
    "bracket": ("bracket_cmd", "bracket r_eps(A) with verified ends and write certificates"),
    "panel": ("panel_cmd", "build a panel of real attention operators from a checkpoint"),
    "list": ("list_cmd", "list the operators of a panel .npz (names for --operator)"),
    "geometry": ("geometry_cmd", "interaction geometry: tau, kappa, Phi, native Gamma (certified sides)"),
    "supports": ("supports_cmd", "exponent experiment on grid/sphere/ball supports"),
    "audit": ("audit_cmd", "audit a published bracket table (confirm, tighten or refute each row)"),
    "budgets": ("budgets_cmd", "fraction of heads for which rank budgets are feasible / impossible"),
    "profile": ("profile_cmd", "plot the certified lower and upper rank curves of one operator"),
    "analyze": ("analyze_cmd",
                "does interaction geometry predict certified rank? (concordance, held-out, invariance)"),
    "kv-budgets": ("kv_budgets_cmd", "certified KV-cache budgets per head: the minimum for any common-set "
                                     "compression, and named eviction policies' verified budgets"),
    "survey": ("survey_cmd", "capture a model's heads, bracket every one and write the layer x head page"),
    "report": ("report_cmd", "render a bracket campaign folder as one static HTML page (certificates re-verified)"),
}
