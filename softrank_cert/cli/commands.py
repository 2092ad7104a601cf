"""The commands of ``softrank``: each one's module, its line in the command list and its description.

``softrank_cert.cli.main`` builds the full parser of the command a command line names and only the
list line of every other one, so that ``softrank --help``, ``softrank CMD --help`` and a refused
argument import one command module at most (and no study, solver, scipy or matplotlib)."""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    """A command of ``softrank``."""

    #: The module of ``softrank_cert.cli`` whose ``add_NAME(sub)`` builds its parser.
    module: str
    #: Its line in the command list (``softrank --help``).
    line: str
    #: Its description: the paragraph under the usage of ``softrank NAME --help``.
    description: str


#: name -> its :class:`Command`, in the order of the command list.
COMMANDS: dict[str, Command] = {
    "keygen": Command("keys", "create an Ed25519 signing key (did:key)",
                      "Create an Ed25519 key. The private key file is written with mode 0600; the public key goes "
                      "to FILE.pub (give that to people who verify). An existing FILE or FILE.pub is never "
                      "replaced."),
    "sign": Command("keys", "sign (or re-sign) a certificate with eddsa-jcs-2022",
                    "Add an eddsa-jcs-2022 Data Integrity proof to a certificate (any existing proof is replaced) "
                    "after re-verifying every claim with the trusted kernel, as softrank-verify does: a certificate "
                    "with a claim that is not VERIFIED is refused. The file is rewritten atomically."),
    "bracket": Command("bracket_cmd", "bracket r_eps(A) with verified ends and write certificates",
                       "Run the float64 solvers on an operator, keep the tightest ends the trusted kernel verifies "
                       "at each tolerance, and write a (signed) certificate."),
    "panel": Command("panel_cmd", "build a panel of real attention operators from a checkpoint",
                     "Run a checkpoint (numpy + safetensors, no torch; with --hf: transformers itself) on the first "
                     "w tokens of a document (or on an image) and store every selected head's operator as a panel "
                     ".npz."),
    "list": Command("list_cmd", "list the operators of a panel .npz (names for --operator)",
                    "Print the names of the operators an .npz file holds (natural order: L0H2 before L0H10), one "
                    "per line: the names that --operator takes."),
    "geometry": Command("geometry_cmd", "interaction geometry: tau, kappa, Phi, native Gamma (certified sides)",
                        "Certified bounds on the theorem's quantities for a rank-r retained part T of the "
                        "interaction C = P_m S P_N (default: truncated SVD of C)."),
    "supports": Command("supports_cmd", "exponent experiment on grid/sphere/ball supports",
                        "Sweep kappa at fixed eps on a support, bracket each operator with verified certificates, "
                        "and bound the growth exponent between consecutive points."),
    "audit": Command("audit_cmd", "audit a published bracket table (confirm, tighten or refute each row)",
                     "Verify supplied certificates, or reproduce and try to refute each published bracket end with "
                     "the solvers; every audited end is VERIFIED by the trusted kernel."),
    "budgets": Command("budgets_cmd", "fraction of heads for which rank budgets are feasible / impossible",
                       "For every operator of the panels, bracket r_eps with kernel-verified ends and classify each "
                       "rank budget as feasible, impossible or unresolved; report the fractions per document and "
                       "block width."),
    "profile": Command("profile_cmd", "plot the certified lower and upper rank curves of one operator",
                       "Certified profiles of r_eps(A) against eps: the lower curve (largest verified tolerance t_k "
                       "of each lower certificate) and the upper curve (smallest verified tolerance e_r of each "
                       "witness); every step is VERIFIED by the trusted kernel."),
    "analyze": Command("analyze_cmd",
                       "does interaction geometry predict certified rank? (concordance, held-out, invariance)",
                       "Read kernel-verified brackets from certificates, compute the intrinsic, native and baseline "
                       "scores of every operator, and report how well each orders the certified ranks, whether it "
                       "adds held-out information beyond a calibrated baseline, and what a power-of-two "
                       "refactorization does to it."),
    "kv-budgets": Command("kv_budgets_cmd",
                          "certified KV-cache budgets per head: the minimum for any common-set compression, and "
                          "named eviction policies' verified budgets",
                          "For every head of a bracket folder: the certified minimum KV-cache size of any "
                          "common-set compression, and the kernel-verified budget of named eviction policies."),
    "survey": Command("survey_cmd", "capture a model's heads, bracket every one and write the layer x head page",
                      "Capture every selected head of a model on a document, bracket each one's rank with "
                      "kernel-verified certificates, and write the layer x head page: one resumable command, its "
                      "CPU time estimated before any work."),
    "report": Command("report_cmd",
                      "render a bracket campaign folder as one static HTML page (certificates re-verified)",
                      "Render a 'softrank bracket --all' campaign folder, or a plain folder of certificate files, "
                      "as one static HTML page: every certificate re-verified by the trusted kernel, tables per "
                      "group, figures, links."),
}
