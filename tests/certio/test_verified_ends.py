"""Verified ends in the types: the certificate writer takes only ends the kernel sealed.

``certio.issuing.certificate_for`` is the one function that writes a certificate; it accepts a
bracket only when both ends were sealed by ``certio.verified`` on a VERIFIED verdict for that
operator object and that tolerance string.  Each way around the seal is shown refused (exit 4,
``InternalInvariantError``), and a genuine end accepted.
"""

from __future__ import annotations

import ast
import copy
import pickle
from pathlib import Path

import numpy as np
import pytest

import softrank_cert
from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd
from softrank_cert.certio.issuing import certificate_for
from softrank_cert.certio.verified import (VerifiedBracket, VerifiedLower, VerifiedUpper, verify_bracket,
                                           verify_lower_end, verify_upper_end)
from softrank_cert.errors import EXIT_INTERNAL, InternalInvariantError
from softrank_cert.kernel import Operator, Status, verify_upper
from softrank_cert.verification import verify_certificate_document

EPS = "0.5"


def _operator(seed: int = 0) -> Operator:
    rng = np.random.default_rng(seed)
    return Operator.from_qk(rng.standard_normal((6, 3)), rng.standard_normal((6, 3)))


def _witness(op: Operator, r: int) -> tuple[np.ndarray, np.ndarray]:
    """The rank-r truncated SVD of the float64 A (a witness the kernel verifies at EPS)."""
    Q, K = op.arrays["Q"], op.arrays["K"]
    S = Q @ K.T / np.sqrt(Q.shape[1])
    A = np.exp(S - S.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    u, s, vt = np.linalg.svd(A)
    return np.ascontiguousarray(u[:, :r] * s[:r]), np.ascontiguousarray(vt[:r].T)


@pytest.fixture
def genuine():
    """An operator and a genuine bracket at EPS: trivial lower k = 1, a rank-2 SVD witness."""
    op = _operator()
    U, W = _witness(op, 2)
    lower = verify_lower_end(op, EPS, 1, None, None, "trivial")
    upper = verify_upper_end(op, EPS, 2, U, W, "tsvd")
    assert lower is not None and upper is not None
    return op, VerifiedBracket(EPS, lower, upper), (U, W)


def _refused(op: Operator, brackets: list, match: str) -> None:
    with pytest.raises(InternalInvariantError, match=match) as caught:
        certificate_for("t/op", op, brackets)
    assert caught.value.exit_code == EXIT_INTERNAL


def test_a_genuine_end_is_written_and_verifies(genuine):
    op, bracket, (U, W) = genuine
    document = certificate_for("t/op", op, [bracket])
    report = verify_certificate_document(document)
    assert [(v.status, v.rank) for pair in report.pairs for v in pair] == [(Status.VERIFIED, 1), (Status.VERIFIED, 2)]
    assert document["brackets"][0]["upper"]["construction"] == "tsvd"


def test_an_unverified_end_is_refused(genuine):
    """A plain format bracket (the claim without a verdict) is not a VerifiedBracket; one whose
    witness the kernel REJECTS never becomes a sealed end at all."""
    op, bracket, (U, W) = genuine
    plain = Bracket(EPS, LowerEnd(1, "trivial"), UpperEnd(2, "tsvd", U, W))
    _refused(op, [plain], "only kernel-verified ends")
    assert verify_upper(op, "0.0001", 2, U, W).status is Status.REJECTED
    assert verify_upper_end(op, "0.0001", 2, U, W, "tsvd") is None
    assert verify_bracket(op, Bracket("0.0001", LowerEnd(1, "trivial"), UpperEnd(2, "tsvd", U, W))) is None


def test_the_constructor_demands_the_seal(genuine):
    op, bracket, _ = genuine
    with pytest.raises(TypeError, match="made by softrank_cert.certio.verified only"):
        VerifiedUpper(seal=object(), operator=op, eps=EPS, rank=2, method="tsvd", arrays=None, estimate=None,
                      verdict=bracket.upper.verdict)


def test_an_object_new_look_alike_is_refused(genuine):
    """An instance of the real class made by ``object.__new__``, every slot copied from a genuine
    end, is not one the kernel sealed."""
    op, bracket, _ = genuine
    forged = object.__new__(VerifiedUpper)
    for name in ("_operator", "eps", "rank", "method", "_arrays", "estimate", "verdict", "_digest"):
        object.__setattr__(forged, name, getattr(bracket.upper, name))
    _refused(op, [VerifiedBracket(EPS, bracket.lower, forged)], "not a VerifiedUpper sealed")


def test_a_subclass_and_a_same_named_class_are_refused(genuine):
    op, bracket, _ = genuine

    class Sub(VerifiedUpper):
        __slots__ = ()

    sub = object.__new__(Sub)
    for name in ("_operator", "eps", "rank", "method", "_arrays", "estimate", "verdict", "_digest"):
        object.__setattr__(sub, name, getattr(bracket.upper, name))
    _refused(op, [VerifiedBracket(EPS, bracket.lower, sub)], "Sub is not a VerifiedUpper")

    class VerifiedLower:  # the same name and fields, another class  # noqa: F811
        __slots__ = ("k", "X", "Y", "method", "eps", "verdict")

        def __init__(self, end):
            for name in self.__slots__:
                setattr(self, name, getattr(end, name))

    _refused(op, [VerifiedBracket(EPS, VerifiedLower(bracket.lower), bracket.upper)], "not a VerifiedLower sealed")


def test_ends_swapped_between_sides_are_refused(genuine):
    op, bracket, _ = genuine
    _refused(op, [VerifiedBracket(EPS, bracket.upper, bracket.lower)], "not a VerifiedLower sealed")


def test_an_end_of_another_operator_is_refused(genuine):
    """Sealed for an operator with the very same bits, but another object: refused (the writer
    compares the operator's identity)."""
    op, bracket, _ = genuine
    twin = _operator()
    assert twin is not op and repr(twin) == repr(op)
    _refused(twin, [bracket], "verified for another operator")
    _refused(_operator(seed=1), [bracket], "verified for another operator")


def test_an_end_at_another_tolerance_is_refused(genuine):
    """The tolerance string must match exactly: 0.50 is the same number as 0.5 but not the claim."""
    op, bracket, _ = genuine
    _refused(op, [VerifiedBracket("0.50", bracket.lower, bracket.upper)], "verified at eps 0.5")
    other = verify_lower_end(op, "0.6", 1, None, None, "trivial")
    assert other is not None
    _refused(op, [VerifiedBracket(EPS, other, bracket.upper)], "verified at eps 0.6")


def test_arrays_cannot_change_after_sealing(genuine):
    """The sealed arrays are private read-only copies: the caller's arrays may change, the sealed
    ones cannot be written or made writable, and one swapped in behind the seal is detected."""
    op, bracket, (U, W) = genuine
    sealed_U = bracket.upper.U
    U[0, 0] += 1.0  # the caller's array, not the sealed copy
    assert sealed_U[0, 0] != U[0, 0] and not np.shares_memory(sealed_U, U)
    with pytest.raises(ValueError):
        sealed_U[0, 0] = 0.0
    with pytest.raises(ValueError):
        sealed_U.flags.writeable = True
    with pytest.raises(AttributeError, match="immutable"):
        bracket.upper.rank = 1
    document = certificate_for("t/op", op, [bracket])  # still the verified witness
    assert verify_certificate_document(document).pairs[0][1].status is Status.VERIFIED
    object.__setattr__(bracket.upper, "_arrays", (U, W))  # a determined swap behind the seal
    _refused(op, [bracket], "arrays changed after the kernel verified them")


def test_a_claim_inconsistent_with_its_verdict_is_refused(genuine):
    op, bracket, _ = genuine
    object.__setattr__(bracket.upper, "rank", 3)  # the verdict says r = 2
    _refused(op, [bracket], "is not a VERIFIED upper claim of rank 3")


def test_sealed_ends_do_not_pickle_and_copies_are_the_same_end(genuine):
    _, bracket, _ = genuine
    with pytest.raises(TypeError, match="do not leave their process"):
        pickle.dumps(bracket.upper)
    assert copy.copy(bracket.upper) is bracket.upper and copy.deepcopy(bracket.lower) is bracket.lower


def test_verify_bracket_seals_a_decoded_bracket_again(genuine):
    """A decoded certificate's bracket is sealed again only by the kernel (the resumed budget
    study and audit write from such ends)."""
    op, bracket, _ = genuine
    from softrank_cert.certio.certificate import decode_certificate

    (decoded,) = decode_certificate(certificate_for("t/op", op, [bracket])).brackets
    again = verify_bracket(op, decoded)
    assert again is not None and (again.lower.k, again.upper.r) == (1, 2)
    assert certificate_for("t/op", op, [again])["brackets"] == certificate_for("t/op", op, [bracket])["brackets"]


def test_only_the_writer_builds_certificate_documents():
    """No module of the package but ``certio/issuing.py`` calls ``certificate_document`` (the
    format's builder, which takes plain claims): every certificate goes through the writer."""
    package = Path(softrank_cert.__file__).resolve().parent
    callers = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name in ("certificate_document", "sign_document"):
                    callers.append((path.relative_to(package).as_posix(), name))
    assert sorted(set(callers)) == [("certio/issuing.py", "certificate_document"), ("certio/signing.py", "sign_document")]


def test_sealed_end_fields(genuine):
    _, bracket, (U, W) = genuine
    lower, upper = bracket.lower, bracket.upper
    assert isinstance(lower, VerifiedLower) and (lower.k, lower.X, lower.Y, lower.method) == (1, None, None, "trivial")
    assert (upper.r, upper.construction, upper.U.shape, upper.W.shape) == (2, "tsvd", (6, 2), (6, 2))
    assert bracket.resolved is False and upper.verdict.status is Status.VERIFIED and upper.eps == EPS


def test_the_seal_stops_accidents_not_code_in_this_process(genuine):
    """Issue 48: the docstrings claimed the seal stops everything but ctypes; ``object.__setattr__``
    on a sealed end's fields gets a false claim written.  What is trusted is a re-check: the
    verifier rejects it, and the docstrings now say exactly that."""
    import softrank_cert.certio.verified as verified
    import softrank_cert.kernel.verdict as verdict

    op, bracket, (U, W) = genuine
    forged = (np.zeros_like(U), np.zeros_like(W))  # U W^T = 0: far from A at EPS
    object.__setattr__(bracket.upper, "_arrays", forged)
    object.__setattr__(bracket.upper, "_digest", verified._digest(forged))
    document = certificate_for("t/op", op, [bracket])  # the seal did not stop code in this process
    report = verify_certificate_document(document)
    assert [v.status for v in report.verdicts] == [Status.VERIFIED, Status.REJECTED]
    for module in (verified, verdict):
        text = " ".join((module.__doc__ or "").split())
        assert "stops accidents, not code in this process" in text, module.__name__
        assert "re-check by ``softrank-verify``" in text, module.__name__
    assert "can forge anything.  What it" not in verified.__doc__
