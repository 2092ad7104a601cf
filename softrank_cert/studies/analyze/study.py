"""Does interaction geometry predict certified rank?  (UNTRUSTED study logic.)

The research's fourth finding (the SoftRank study, docs/design.md): the computable intrinsic score does not
predict how much rank a trained head needs -- its agreement with the certified order is
heterogeneous across families and it adds no detectable held-out information beyond a
calibrated baseline -- and the native-coordinate geometry moves under changes of coordinates
that leave ``A`` fixed.  This module asks the same question where every bracket end is a
kernel-VERIFIED certificate end.

**Brackets.**  Each certificate is re-checked by :func:`~softrank_cert.verification.
verify_certificate_bytes` (the engine of ``softrank-verify``); only VERIFIED ends count, and a
certificate whose operator is not bit-identical to the panel operator of the same name is
refused.  At tolerance eps operator i **provably needs more rank** than j when
``lower_i > upper_j`` (then ``r_eps(A_i) >= lower_i > upper_j >= r_eps(A_j)``).  No midpoint of
a bracket is ever used as a rank.

**Scores** (per operator and eps; larger = predicts more rank):

* ``intrinsic`` -- ``log Phi*(eps) = min over r in R with tau(T_r) < eps of
  (r/2) log(1 + kappa(T_r)/(eps - tau(T_r))^2)``, ``T_r`` the rank-r truncated SVD of
  ``C = P_m S P_N`` refactored for a small radius product, evaluated with the kernel's
  **certified upper bounds** of tau and kappa (:func:`phi_bound`), so the score is a certified
  *upper* bound of the minimum over the grid; the minimising r is the **interaction
  dimension**.  Infinite when no r of the grid has a certified ``tau < eps``.  The rank grid
  ``R`` (:func:`rank_grid`) is ``{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}`` up to
  ``min(d, 64)`` for ``qk`` operators (plus that top rank: at ``r = d`` the retained part is
  all of C, since ``rank C <= d``) and up to ``min(p - 1, 64)`` for ``scores``.  The kernel
  certifies the ranks that can matter (:func:`operator_geometry`): ranks whose float64 tau
  estimate exceeds the largest eps cannot qualify and are skipped, and per eps only the rank
  with the best float64 estimate of the score and those within a relative 1e-6 of it are
  certified.  Leaving a rank out could only raise the minimum, so the score stays a certified
  upper bound of the minimum over the grid either way.
* ``native`` -- the same formula in the given coordinates: the head dimension d for r, the
  native ``Gamma = beta rho_Q rho_K`` for kappa, and ``tau = 0`` (``A = softmax(beta Q K^T)``
  exactly, so the native factorization leaves no residual): ``(d/2) log(1 + Gamma/eps^2)``
  with the certified upper bound of Gamma (``qk`` operators only).  Not invariant: that is the
  point (see the invariance check).
* ``baseline`` -- a calibrated baseline from cheap operator statistics that know nothing of
  the theorem: ``log width``, ``log eps``, the mean row entropy of A (nats) and
  ``log effective rank`` of A (Roy & Vetterli: ``exp`` of the entropy of the normalised
  singular values), combined linearly and fitted to the brackets with the interval loss
  (:func:`fit_interval_model`).  A float64 estimate, not certified.
* ``interaction_dim`` -- the interaction dimension r* itself (the r attaining the intrinsic
  score): the research's "robust interaction dimension", a derived quantity, not a bound.

**Certified concordance** of a score: among the certified-ordered pairs (same eps), the share
the score orders the same way (ties count half); pairs are pooled over the tolerances and
broken down by family / document / width / layer (pairs inside one group).  Confidence
intervals: percentile bootstrap over operators (an operator's rows at every eps move
together), :data:`BOOTSTRAP_RESAMPLES` resamples, seed :data:`BOOTSTRAP_SEED`.

**Held-out information** (:func:`heldout`): group-wise cross-validation, folds by document
and, separately, by layer.  On the training operators the baseline is fitted against the
brackets with the interval loss (zero inside ``[log lower, log upper]``, the distance outside)
and so is the baseline plus one score; the held-out interval loss and the held-out certified
concordance (pairs inside one test fold) of the two models are compared with paired bootstrap
intervals of the differences.

**Invariance** (:func:`refactored_operator`): ``Q -> Q D``, ``K -> K D^{-1}`` with a
power-of-two diagonal D is exact in float64 and leaves ``A`` fixed; every operator's
certificate ends are re-verified on the refactored operator and its whole geometry recomputed,
and the report counts operators whose brackets, C, tau, kappa and intrinsic score come out
bit-identical and those whose native score moves.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import CertificateRefusedError, InvalidInputError
from ...geometry.intrinsic import double_above, operator_geometry, rank_grid, refactored_operator
from ...kernel import Status, parse_tolerance
from ...util.tolerances import parse_eps_list
from .document import build_document
from .stats import operator_features
from ...plumbing.certificate_files import declared_format, expand_json_paths, is_certificate_format
from ...util.files import loads_unique, write_text_atomic
from ...util.progress import Progress, stage_line

if TYPE_CHECKING:
    from ...util.operator_files import NamedOperator

#: Version of the per-operator results (:func:`analyze_task`): bump it whenever what they
#: contain or how it is computed changes (study caches are keyed by it).
RESULT_VERSION = "2"  # 2: certified strings with the report contract's 17 digits



# ============================================================================ one operator

def _verdict_key(v: Any) -> tuple:
    """What a bracket end claims and its verdict (the bracket itself)."""
    return (v.status, v.side, v.rank, v.eps)


def _overlap(a: tuple[Fraction, Fraction] | None, b: tuple[Fraction, Fraction] | None) -> bool:
    """Two enclosures of one real number must intersect (None: no enclosure on either side)."""
    if a is None or b is None:
        return a is None and b is None
    return a[0] <= b[1] and b[0] <= a[1]


def verified_brackets(op: Any, name: str, raw: bytes, source: str, eps_list: list[str], options: dict[str, Any]
                      ) -> tuple[Any, Any, dict[str, dict[str, Any]], list[str]]:
    """Re-verify the certificate ``raw`` (every claim decided by the kernel now) and return
    ``(certificate, verification, brackets, dropped)``: the VERIFIED ends per eps, refusing the
    certificate unless every claim is VERIFIED (or dropping the tolerances that are not with
    ``options["drop_unverified"]``); it must be about the panel operator ``op`` bit for bit."""
    from ...plumbing.campaign_inputs import operator_mismatch
    from ...verification import verify_certificate_bytes

    verification = verify_certificate_bytes(raw, source=source, trusted_keys=options.get("trusted_keys"),
                                            require_signature=bool(options.get("require_signature")),
                                            max_prec=options.get("max_prec", 512))
    certificate = verification.certificate
    assert certificate is not None  # verify_certificate_bytes always decodes it
    reason = operator_mismatch(op, certificate.operator)
    if certificate.operator_id != name or reason:
        raise InvalidInputError(f"{source}: certificate is not about the panel operator {name!r}: "
                                f"{reason or 'operator id ' + repr(certificate.operator_id)}")
    if op.mask != "none":
        raise InvalidInputError(f"{name}: softrank analyze needs unmasked 'qk' or 'scores' operators: this one is "
                                f"causal, and its scores are not computed (the theorem's geometry assumes one common "
                                f"positive support, which a causal mask does not give; bracket, profile and budgets "
                                f"do apply)")
    if op.kind not in ("qk", "scores"):
        raise InvalidInputError(f"{name}: softrank analyze needs unmasked 'qk' or 'scores' operators (the theorem "
                                "assumes one common positive support and needs scores)")
    by_eps: dict[Fraction | None, tuple[Any, Any]] = {}
    for bracket, ends in zip(certificate.brackets, verification.pairs):
        by_eps[bracket.eps_value] = ends
    brackets: dict[str, dict[str, Any]] = {}
    dropped: list[str] = []
    for eps in eps_list:
        pair = by_eps.get(parse_tolerance(eps))
        if pair is None:
            raise InvalidInputError(f"{source}: no bracket at eps {eps}")
        bad = [v for v in pair if v.status is not Status.VERIFIED]
        if bad:
            if options.get("drop_unverified"):
                dropped.append(eps)
                continue
            worst = Status.REJECTED if any(v.status is Status.REJECTED for v in bad) else Status.INCONCLUSIVE
            raise CertificateRefusedError(
                f"{source}: claim {bad[0].claim} at eps {bad[0].eps} is {bad[0].status.value} by the kernel; only "
                "VERIFIED ends count (use --drop-unverified to leave such tolerances out)",
                1 if worst is Status.REJECTED else 3)
        brackets[eps] = {"lower": pair[0].rank, "upper": pair[1].rank, "lower_method": pair[0].method,
                         "upper_method": pair[1].method}
    return certificate, verification, brackets, dropped


#: The fields of a per-operator result that a cache may supply (everything but the brackets,
#: which are always re-derived from a verification in this run).
CACHED_FIELDS = ("features", "scores", "grid", "gamma_upper", "invariance", "seconds")


def analyze_task(spec: dict[str, Any], name: str, raw: bytes, source: str, eps_list: list[str],
                 ranks: list[int] | None, options: dict[str, Any]) -> dict[str, Any]:
    """Everything about one operator (a task for :func:`~softrank_cert.plumbing.parallel.run_tasks`).

    Re-verifies the certificate (:func:`verified_brackets`), computes features, geometry, scores
    and the invariance check.  Returns plain data (floats, ints, strings).
    """
    from ...plumbing.json_contract import bound_up
    from ...plumbing.parallel import unpack_operator
    from ...verification import check_claims

    start = time.perf_counter()
    op = unpack_operator(spec)
    certificate, verification, brackets, dropped = verified_brackets(op, name, raw, source, eps_list, options)
    verdicts = verification.verdicts
    verify_s = time.perf_counter() - start
    grid = rank_grid(op, ranks)
    features = operator_features(op)
    t = time.perf_counter()
    geo = operator_geometry(op, grid, eps_list)
    geometry_s = time.perf_counter() - t
    scores: dict[str, dict[str, Any]] = {}
    for eps in eps_list:
        log_phi, r_star = geo.intrinsic[eps]
        entry: dict[str, Any] = {
            "intrinsic": math.inf if log_phi is None else double_above(log_phi.hi),
            "intrinsic_bound": None if log_phi is None else bound_up(log_phi.hi),
            "interaction_dim": math.inf if r_star is None else r_star,
        }
        if geo.native:
            entry["native"] = double_above(geo.native[eps].hi)
            entry["native_bound"] = bound_up(geo.native[eps].hi)
        scores[eps] = entry
    invariance = None
    t = time.perf_counter()
    try:
        op2 = refactored_operator(op) if op.kind == "qk" else None
    except InvalidInputError:  # the power-of-two scaling would overflow or underflow: not exact
        op2 = None
    if op2 is not None:
        verdicts2 = [v for pair in check_claims(dataclasses.replace(certificate, operator=op2),
                                                max_prec=options.get("max_prec", 512)) for v in pair]
        geo2 = operator_geometry(op2, rank_grid(op2, ranks), eps_list)
        invariance = {
            "brackets_identical": [_verdict_key(v) for v in verdicts] == [_verdict_key(v) for v in verdicts2],
            "margins_identical": [(v.margin, v.value) for v in verdicts] == [(v.margin, v.value) for v in verdicts2],
            "margins_consistent": all(_overlap(a.margin, b.margin) and _overlap(a.value, b.value)
                                      for a, b in zip(verdicts, verdicts2)),
            "C_identical": geo.C_bytes == geo2.C_bytes and geo.c_bounds == geo2.c_bounds,
            "tau_identical": [(g.r, g.tau_float, g.tau, g.tau_tanh) for g in geo.ranks]
            == [(g.r, g.tau_float, g.tau, g.tau_tanh) for g in geo2.ranks],
            "kappa_identical": [(g.r, g.kappa_float, g.kappa_upper) for g in geo.ranks]
            == [(g.r, g.kappa_float, g.kappa_upper) for g in geo2.ranks],
            "intrinsic_identical": geo.intrinsic == geo2.intrinsic,
            "native_moved": geo.gamma != geo2.gamma and all(geo.native[e] != geo2.native[e] for e in eps_list),
            "native_refactored": {eps: double_above(geo2.native[eps].hi) for eps in eps_list},
        }
    invariance_s = time.perf_counter() - t
    return {
        "operator": name, "source": source, "kind": op.kind, "shape": list(op.shape), "p": op.p, "d": op.head_dim,
        "features": features, "brackets": brackets, "dropped": dropped, "scores": scores,
        "grid": [{"r": g.r, "tau_float": g.tau_float, "certified": g.certified,
                  "tau_upper": None if not g.certified else bound_up(g.tau.hi),
                  "kappa_upper": None if g.kappa_upper is None else bound_up(g.kappa_upper)} for g in geo.ranks],
        "gamma_upper": None if geo.gamma is None else bound_up(geo.gamma.hi),
        "invariance": invariance,
        "seconds": {"verify": round(verify_s, 3), "geometry": round(geometry_s, 3),
                    "invariance": round(invariance_s, 3), "total": round(time.perf_counter() - start, 3)},
    }



def recheck_task(spec: dict[str, Any], name: str, raw: bytes, source: str, eps_list: list[str],
                 options: dict[str, Any], cached: dict[str, Any]) -> dict[str, Any]:
    """One operator from the cache: the certificate re-verified now (:func:`verified_brackets`:
    brackets, dropped tolerances and any refusal exactly as in a fresh run), the geometry
    (:data:`CACHED_FIELDS`) from the cache entry, which is keyed by the software version, the
    result format, the exact operator, the certificate's bytes and the options."""
    from ...plumbing.parallel import unpack_operator

    start = time.perf_counter()
    op = unpack_operator(spec)
    _certificate, _report, brackets, dropped = verified_brackets(op, name, raw, source, eps_list, options)
    result = {"operator": name, "source": source, "kind": op.kind, "shape": list(op.shape), "p": op.p,
              "d": op.head_dim, "brackets": brackets, "dropped": dropped, **{k: cached[k] for k in CACHED_FIELDS}}
    result["seconds"] = {**cached["seconds"], "verify": round(time.perf_counter() - start, 3)}
    return result


def operator_result(spec: dict[str, Any], name: str, raw: bytes, source: str, eps_list: list[str],
                    ranks: list[int] | None, options: dict[str, Any], cached: dict[str, Any] | None) -> dict[str, Any]:
    """The task of one operator: :func:`recheck_task` with a usable cache entry, else :func:`analyze_task`."""
    if cached is not None:
        return recheck_task(spec, name, raw, source, eps_list, options, cached)
    return analyze_task(spec, name, raw, source, eps_list, ranks, options)


def cache_key(op: Any, name: str, raw: bytes, eps_list: list[str], ranks: list[int] | None,
              options: dict[str, Any]) -> str:
    """The key of one operator's cache entry: :func:`~softrank_cert.plumbing.campaign_inputs.inputs_sha256`
    of the software version, :data:`RESULT_VERSION`, the exact operator (kind, beta, mask, shapes,
    bytes), the name, the certificate's bytes, the tolerances, the rank grid and the options."""
    from ...plumbing.campaign_inputs import inputs_sha256

    inputs = {"name": name, "eps": eps_list, "ranks": ranks, "drop_unverified": bool(options.get("drop_unverified")),
              "require_signature": bool(options.get("require_signature")),
              "trusted_keys": sorted(options.get("trusted_keys") or []), "max_prec": options.get("max_prec")}
    return inputs_sha256(op, RESULT_VERSION, inputs, {"certificate": raw})


def usable_cache_entry(raw: bytes | str, key: str, name: str, eps_list: list[str]) -> dict[str, Any] | None:
    """A cache file's entry when it is one for exactly this key (well-formed, about ``name``, every
    tolerance scored), else None (then the operator is computed again)."""
    if isinstance(raw, str):
        return None
    try:
        entry = loads_unique(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key or entry.get("operator") != name:
        return None
    if any(field not in entry for field in CACHED_FIELDS) or not isinstance(entry["scores"], dict) or \
            sorted(entry["scores"]) != sorted(eps_list) or not isinstance(entry["seconds"], dict):
        return None
    return entry


def _load_panels(paths: list[str]) -> tuple[dict[str, NamedOperator], dict[str, str]]:
    from ...util.operator_files import load_operators

    operators: dict[str, NamedOperator] = {}
    stems: dict[str, str] = {}
    where: dict[str, str] = {}
    for path in paths:
        for item in load_operators(Path(path)):
            if item.name in operators:
                raise InvalidInputError(f"operator {item.name!r} is in both {where[item.name]} and {path}")
            operators[item.name], stems[item.name], where[item.name] = item, Path(path).stem, path
    return operators, stems


def _read_certificates(paths: list[str]) -> list[tuple[str, bytes, str, list[str]]]:
    """``(path, bytes, operator id, eps strings)`` of each certificate, schema-checked (exit 2)."""
    from ...certio.certificate import check_schema, parse_json_strict, read_certificate_bytes

    out = []
    for path in paths:
        raw = read_certificate_bytes(path)  # the one size-capped reader (exit 2 when unreadable or too large)
        if not is_certificate_format(declared_format(raw)):
            continue  # a report or a campaign manifest beside the certificates: no claim to analyze
        try:
            document = parse_json_strict(raw)
            check_schema(document)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{path}: {exc}") from None
        out.append((path, raw, document["operator"]["id"], [b["eps"] for b in document["brackets"]]))
    return out


def _choose_eps(requested: str | None, certificates: list[tuple[str, bytes, str, list[str]]]) -> list[str]:
    """Requested tolerances (each in every certificate) or those common to all certificates."""
    def values(eps: list[str]) -> dict[Fraction, str]:
        return {parse_tolerance(e): e for e in eps}

    if requested is not None:
        wanted = parse_eps_list(requested)
        for path, _raw, _name, eps in certificates:
            have = values(eps)
            for e in wanted:
                if parse_tolerance(e) not in have:
                    raise InvalidInputError(f"{path}: no bracket at eps {e} (it has {', '.join(eps)})")
        # the certificates' own spelling (so that "0.250" matches "0.25")
        first = values(certificates[0][3])
        return [first[parse_tolerance(e)] for e in wanted]
    common = set(values(certificates[0][3]))
    for _path, _raw, _name, eps in certificates[1:]:
        common &= set(values(eps))
    if not common:
        raise InvalidInputError("the certificates share no tolerance: choose with --eps")
    first = values(certificates[0][3])
    return [first[v] for v in sorted(common)]


def analysis(certificates: list[str], panels: list[str], eps: str | None = None, *, ranks: list[int] | None = None,
             resamples: int = 2000, seed: int = 20260, trusted_keys: frozenset[str] | None = None,
             require_signature: bool = False, drop_unverified: bool = False, jobs: int = 1,
             scheduler: str | None = None, show_progress: bool = True, cache: Path | None = None,
             manifest: Path | None = None, resume_command: str | None = None) -> dict[str, Any]:
    """Run the analysis (``softrank analyze``; see the module docstring) and return the report.

    ``cache`` (``--resume``): a folder of per-operator results, each written atomically as soon as
    its operator is done, so that an interrupted analysis resumes where it stopped; ``manifest``
    (with it) the campaign manifest (:mod:`softrank_cert.plumbing.campaign`).  A cache entry is a
    shortcut only: it is used under exactly its key
    (:func:`~softrank_cert.plumbing.campaign_inputs.inputs_sha256`: software version, result
    format, exact operator with shapes, certificate bytes, tolerances, ranks and options), and
    even then the certificate is re-verified and the brackets taken from that verification
    (:func:`recheck_task`): a planted or stale entry can change no bracket and hide no refusal.
    """
    from contextlib import closing, nullcontext

    from ...kernel import DEFAULT_MAX_PREC
    from ...plumbing.campaign import Campaign
    from ...plumbing.campaign_inputs import read_kept_bytes
    from ...util.operator_files import natural_key
    from ...plumbing.parallel import pack_operator, run_tasks
    from ...plumbing.json_contract import envelope

    for path in panels:
        if not Path(path).is_file():
            raise InvalidInputError(f"{path}: no such file")
    paths = expand_json_paths(certificates)
    if not paths:
        raise InvalidInputError("no certificate files found")
    operators, stems = _load_panels(panels)
    read = _read_certificates(paths)
    seen: dict[str, str] = {}
    for path, _raw, name, _eps in read:
        if name not in operators:
            raise InvalidInputError(f"{path}: certificate operator {name!r} is not in the panels "
                                    f"({', '.join(Path(p).name for p in panels)})")
        if name in seen:
            raise InvalidInputError(f"{path} and {seen[name]} are both about {name!r}")
        seen[name] = path
    eps_list = _choose_eps(eps, read)
    read.sort(key=lambda item: natural_key(item[2]))
    options = {"trusted_keys": trusted_keys, "require_signature": require_signature,
               "drop_unverified": drop_unverified, "max_prec": DEFAULT_MAX_PREC}
    keys = [cache_key(operators[name].operator, name, raw, eps_list, ranks, options) for _path, raw, name, _eps in read]
    cached: list[dict[str, Any] | None] = [None] * len(read)
    campaign = None
    if cache is not None:
        try:
            Path(cache).mkdir(exist_ok=True)
        except OSError as exc:
            raise InvalidInputError(f"cannot create the --resume folder {cache}: {exc.strerror or exc}") from None
        cached = [usable_cache_entry(read_kept_bytes(Path(cache) / f"{key}.json"), key, name, eps_list)
                  for key, (_path, _raw, name, _eps) in zip(keys, read)]
        if manifest is not None:
            parameters = {"panel": [{"path": str(p)} for p in panels], "certificates": len(read),
                          "tolerances": eps_list, "ranks": ranks, "state_folder": Path(cache).name}
            campaign = Campaign(manifest, "analyze", parameters,
                                [(name, {"inputs_sha256": key, "output": f"{key}.json"})
                                 for key, (_path, _raw, name, _eps) in zip(keys, read)],
                                resume=True, must_match={"tolerances": "--eps"}, resume_command=resume_command)
            for (_path, _raw, name, _eps), entry in zip(read, cached):
                if entry is not None:
                    campaign.keep(name, campaign.recorded(name))
            campaign.save()
    tasks = [(pack_operator(operators[name].operator), name, raw, path, eps_list, ranks, options, cached[i])
             for i, (path, raw, name, _eps) in enumerate(read)]
    start = time.perf_counter()
    results: list[Any] = [None] * len(tasks)
    with campaign.running() if campaign is not None else nullcontext(), \
            Progress("softrank analyze", len(tasks), bar=show_progress, label="analysing") as bar:
        with closing(run_tasks(operator_result, tasks, jobs=jobs, scheduler=scheduler,
                               done=lambda j: bar.advance(read[j][2]))) as out:
            for outcome in out:
                i = outcome.index
                results[i] = outcome.unwrap()  # a refused certificate is the command's error (exit 1, 2 or 3)
                bar.finished(read[i][2], f"certificate VERIFIED, scores in {results[i]['seconds']['total']:.1f} s"
                                         + (" (geometry cached)" if cached[i] is not None else ""))
                if cache is not None and cached[i] is None:
                    entry = {"key": keys[i], "operator": read[i][2], **{k: results[i][k] for k in CACHED_FIELDS}}
                    write_text_atomic(Path(cache) / f"{keys[i]}.json", json.dumps(entry))
                    if campaign is not None:
                        campaign.done(read[i][2], outcome, results[i]["seconds"]["total"])
    if campaign is not None:
        campaign.finish()
    stage_line("softrank analyze", f"statistics: concordance, {resamples} bootstrap resamples, held-out fits")
    report = envelope("analyze", build_document(results, stems, eps_list, resamples=resamples, seed=seed))
    report["inputs"] = {"certificates": len(paths), "panels": [str(p) for p in panels],
                        "operators_without_certificate": len(set(operators) - set(seen))}
    report["seconds"] = round(time.perf_counter() - start, 1)
    return report
