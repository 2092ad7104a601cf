"""Replay issue 25's attacks on a source tree and print what each did (one line per attack).

Usage (the tree's package is imported through PYTHONPATH, so any checkout can be compared)::

    python benchmarks/replay_issue25.py --tree .                 # this checkout
    git archive 94f9a06 | tar -x -C /tmp/base && python benchmarks/replay_issue25.py --tree /tmp/base

Each attack is the one the review describes: tamper with a manifest / state / cache, resume, and
compare the report with an untampered run; or the small holes of point 6.  Results of the runs
for the closing note: ``benchmarks/results/replay_issue25.txt``.  About two minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, required=True, help="the source tree whose softrank_cert to attack")
    tree = parser.parse_args().tree.resolve()
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    work = Path(tempfile.mkdtemp(prefix="replay25-"))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "softrank_cert.cli.main", *args], capture_output=True, text=True,
                              env=env, cwd=work, timeout=600)

    def py(code: str) -> str:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                              cwd=work, timeout=600)
        return (done.stdout.strip() or done.stderr.strip().splitlines()[-1]) if done.returncode == 0 or done.stdout \
            else "error: " + done.stderr.strip().splitlines()[-1]

    def report(name: str, text: str) -> None:
        print(f"{name}: {text}", flush=True)

    py(f"""
        from softrank_cert.models import build_panel, write_panel
        write_panel('panel.npz', build_panel('minilm', {str(ROOT / 'examples/data/apache2.txt')!r}, [8], layers=[0, 1],
                    heads=[0, 5]))
        print('ok')""")
    strip = lambda doc: json.dumps([{k: v for k, v in e.items() if k != "seconds"} for e in doc])  # noqa: E731

    # 1. budgets: forged classes
    args = ("budgets", "panel.npz", "--budgets", "2,4,6", "--eps", "0.25", "--budget-seconds", "inf", "--out", "R.json",
            "--json", "--resume")
    first = json.loads(run(*args).stdout)
    manifest = work / "R-campaign.json"
    doc = json.loads(manifest.read_text())
    for entry in doc["operators"].values():
        entry["result"]["classes"] = {b: "feasible" for b in entry["result"]["classes"]}
    manifest.write_text(json.dumps(doc))
    again = json.loads(run(*args).stdout)
    report("1 budgets forged classes", "same report as untampered" if strip(again["operators"]) ==
           strip(first["operators"]) else "FORGED CLASSES REPORTED: " +
           ", ".join(f"{e['operator'].rsplit('/', 1)[-1]} [{e['lower']}, {e['upper']}] {e['classes']}"
                     for e in again["operators"][:1]))

    # 2. audit: forged rows
    names = json.loads(py("""
        import json
        from softrank_cert.util.operator_files import operator_names
        print(json.dumps(operator_names('panel.npz')))"""))
    (work / "table.jsonl").write_text("".join(json.dumps({"operator": n, "eps": "0.25", "lower": 7, "upper": 8}) + "\n"
                                              for n in names))
    args = ("audit", "table.jsonl", "--operators", "panel.npz", "--out", "audit.json", "--budget-seconds", "inf",
            "--json", "--resume")
    first = json.loads(run(*args).stdout)
    manifest = work / "audit-campaign.json"
    doc = json.loads(manifest.read_text())
    for entry in doc["operators"].values():
        for row in entry["result"]["rows"]:
            row.update(status="confirmed", lower=7, upper=8)
    manifest.write_text(json.dumps(doc))
    again = json.loads(run(*args).stdout)
    statuses = lambda d: [(r["status"], r["lower"], r["upper"]) for r in d["rows"]]  # noqa: E731
    report("2 audit forged rows", "same statuses and ends as untampered " + str(statuses(first)[0])
           if statuses(again) == statuses(first) else f"FORGED ROWS REPORTED: {statuses(again)[0]} "
                                                     f"(untampered {statuses(first)[0]})")

    # 3. analyze: a planted cache entry makes a REJECTED certificate count
    out = py("""
        import json, pathlib, subprocess, sys
        from softrank_cert.util.operator_files import load_operators
        from softrank_cert.solvers import bracket_operator
        from softrank_cert.certio.issuing import certificate_for
        item = load_operators('panel.npz')[0]
        brackets = bracket_operator(item.operator, ['0.25'], budget_seconds=float('inf'))
        doc = certificate_for(item.name, item.operator, brackets, item.provenance)
        pathlib.Path('good').mkdir(); pathlib.Path('bad').mkdir()
        pathlib.Path('good/c.json').write_text(json.dumps(doc))
        doc['brackets'][0]['eps'] = '0.0001'
        raw = json.dumps(doc).encode(); pathlib.Path('bad/c.json').write_bytes(raw)
        base = [sys.executable, '-m', 'softrank_cert.cli.main', 'analyze', '--operators', 'panel.npz', '--plot', 'f.png',
                '--bootstrap', '20', '--resume']
        first = subprocess.run(base[:4] + ['good'] + base[4:] + ['--out', 'r.json'], capture_output=True, text=True)
        (entry_path,) = pathlib.Path('r-cache').glob('*.json')
        entry = json.loads(entry_path.read_text())
        scores = next(iter(entry['scores'].values()))
        forged = {'0.0001': {'lower': 1, 'upper': 2, 'lower_method': 'x', 'upper_method': 'y'}}
        from softrank_cert.kernel import DEFAULT_MAX_PREC
        options = {'trusted_keys': None, 'require_signature': False, 'drop_unverified': False, 'max_prec': DEFAULT_MAX_PREC}
        try:
            from softrank_cert.studies.analyze.study import cache_key
            key = cache_key(item.operator, item.name, raw, ['0.0001'], None, options)
        except ImportError:
            from softrank_cert.studies.analyze.study import _cache_key
            from softrank_cert.plumbing.parallel import pack_operator
            key = _cache_key((pack_operator(item.operator), item.name, raw, 'bad/c.json', ['0.0001'], None, options))
        if entry.get('invariance'):
            entry['invariance']['native_refactored'] = {'0.0001': 1.0}
        pathlib.Path(f'r-cache/{key}.json').write_text(json.dumps({**entry, 'key': key, 'source': 'bad/c.json',
            'brackets': forged, 'dropped': [], 'scores': {'0.0001': scores}}))
        pathlib.Path('r-campaign.json').unlink(missing_ok=True)
        fresh = subprocess.run(base[:4] + ['bad'] + base[4:-1] + ['--out', 'fresh.json'], capture_output=True, text=True)
        resumed = subprocess.run(base[:4] + ['bad'] + base[4:] + ['--out', 'r.json', '--json'], capture_output=True,
                                 text=True)
        shown = ''
        if resumed.returncode == 0:
            o = json.loads(resumed.stdout)['operators'][0]
            shown = f" with bracket [{o['lower']}, {o['upper']}]"
        print(f'fresh run exit {fresh.returncode}, resumed with the planted entry exit {resumed.returncode}{shown}')""")
    report("3 analyze planted cache entry", out)
    out = py("""
        import numpy as np
        from softrank_cert.kernel import Operator
        from softrank_cert.plumbing.parallel import pack_operator
        try:
            from softrank_cert.studies.analyze.study import cache_key
            key = lambda op: cache_key(op, 'x', b'{}', ['0.25'], None, {'max_prec': 512})
        except ImportError:
            from softrank_cert.studies.analyze.study import _cache_key
            key = lambda op: _cache_key((pack_operator(op), 'x', b'{}', 's', ['0.25'], None,
                                         {'drop_unverified': False, 'require_signature': False, 'trusted_keys': None}))
        Q = np.arange(8.0).reshape(4, 2)
        a, b = Operator('qk', {'Q': Q, 'K': Q}, beta='1'), Operator('qk', {'Q': Q.reshape(2, 4), 'K': Q.reshape(2, 4)}, beta='1')
        print('same key for shapes 4x2 and 2x4' if key(a) == key(b) else 'keys differ by shape')""")
    report("3 analyze cache key", out)

    # 4. an operator named softrank-campaign
    py("""
        import numpy as np
        rng = np.random.default_rng(4)
        np.savez('named.npz', **{f'{n}/{a}': rng.standard_normal((4, 2)) for n in ('softrank-campaign', 'other')
                                 for a in ('Q', 'K')})
        print('ok')""")
    done = run("bracket", "named.npz", "--all", "--eps", "0.5", "--out", "named/")
    report("4 operator named softrank-campaign", f"exit {done.returncode}: "
           + (done.stdout.strip().splitlines() or [""])[-1][:90] + (done.stderr.strip().splitlines() or [""])[-1][:150])

    # 6a. bracket --resume keeps a planted trivial certificate with forged provenance
    args = ("bracket", "panel.npz", "--all", "--eps", "0.25", "--out", "certs/", "--budget-seconds", "inf", "--json")
    run(*args)
    py("""
        import json
        from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document
        from softrank_cert.plumbing.certificate_files import certificate_path
        from softrank_cert.util.operator_files import load_operators
        from pathlib import Path
        item = load_operators('panel.npz')[0]
        doc = certificate_document(item.name, item.operator, [Bracket('0.25', LowerEnd(0, 'trivial'),
                                   UpperEnd(item.operator.p, 'identity'))], created='2026-01-01T00:00:00Z',
                                   provenance={'source': 'forged'})
        certificate_path(Path('certs'), item.name).write_text(json.dumps(doc))
        print('ok')""")
    done = json.loads(run(*args, "--resume").stdout)
    first = done["operators"][0]["brackets"][0]
    report("6 bracket --resume planted trivial certificate, forged provenance",
           f"kept {done['campaign']['kept']}, computed {done['campaign']['computed']}; first operator reported "
           f"[{first['lower']}, {first['upper']}]")

    # issue 26 point 3: resume with other tolerances
    done = run("bracket", "panel.npz", "--all", "--eps", "0.5", "--out", "certs/", "--resume")
    report("26.3 resume with other --eps", f"exit {done.returncode}: "
           + (done.stderr.strip().splitlines() or ["(no message)"])[-1][:160])

    # 6b. --kernel arb --max-memory 1M on trivial claims
    py("""
        import json, numpy as np
        from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document
        from softrank_cert.kernel import Operator
        op = Operator('scores', {'S': np.random.default_rng(2).standard_normal((64, 64))})
        doc = certificate_document('op', op, [Bracket('0.5', LowerEnd(0, 'trivial'), UpperEnd(64, 'identity'))],
                                   created='2026-01-01T00:00:00Z')
        open('trivial.json', 'w').write(json.dumps(doc)); print('ok')""")
    done = subprocess.run([sys.executable, "-m", "softrank_cert.cli.verify", "trivial.json", "--kernel", "arb",
                           "--max-memory", "1M"], capture_output=True, text=True, env=env, cwd=work)
    report("6 trivial claims, --kernel arb --max-memory 1M", f"exit {done.returncode}")

    # 6c. negative probabilities in a certificate
    py("""
        import json, numpy as np
        from softrank_cert.certio.arrays import encode_array
        from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document
        from softrank_cert.kernel import Operator
        A = np.array([[0.5, 0.5], [0.75, -0.25]])
        doc = certificate_document('op', Operator('probabilities', {'A': np.abs(A)}),
                                   [Bracket('0.5', LowerEnd(0, 'trivial'), UpperEnd(2, 'identity'))],
                                   created='2026-01-01T00:00:00Z')
        doc['operator']['arrays']['A'] = encode_array(A)
        open('negative.json', 'w').write(json.dumps(doc)); np.savez('negative.npz', **{'op/A': A}); print('ok')""")
    done = subprocess.run([sys.executable, "-m", "softrank_cert.cli.verify", "negative.json"], capture_output=True,
                          text=True, env=env, cwd=work)
    npz = run("bracket", "negative.npz", "--eps", "0.5", "--out", "n.json")
    report("6 negative probabilities", f"certificate: softrank-verify exit {done.returncode}; .npz: bracket exit "
           f"{npz.returncode}")

    # 6d. long-double beta in an .npz
    out = py("""
        import numpy as np
        from softrank_cert.util.operator_files import load_operators
        rng = np.random.default_rng(3)
        np.savez('ld.npz', **{'op/Q': rng.standard_normal((3, 2)), 'op/K': rng.standard_normal((3, 2)),
                              'op/beta': np.longdouble(1) / np.longdouble(3)})
        try:
            print('loaded, beta =', load_operators('ld.npz')[0].operator.beta[:24], '(rounded to a double)')
        except Exception as exc:
            print('refused:', str(exc)[:100])""")
    report("6 long-double beta in an .npz", out)

    # 6e. |Q|, |K| ~ 1e160
    out = py("""
        import numpy as np
        from softrank_cert import exact_kernel
        from softrank_cert.kernel import Operator, verify_upper
        rng = np.random.default_rng(0)
        Q, K = rng.standard_normal((6, 2)) * 1e160, rng.standard_normal((6, 2)) * 1e160
        op = Operator.from_qk(Q, K)
        cols = ((Q / 1e160) @ (K / 1e160).T).argmax(axis=1)
        distinct = sorted(set(cols.tolist()))
        U, W = np.zeros((6, len(distinct))), np.zeros((6, len(distinct)))
        U[np.arange(6), [distinct.index(c) for c in cols]] = 1.0
        W[distinct, np.arange(len(distinct))] = 1.0
        r = len(distinct)
        print(', '.join(f'{e} {verify_upper(op, "0.1", r, U, W, engine=e).status.value}' for e in ('auto', 'arb')),
              '; exact', exact_kernel.verify_upper(op, '0.1', r, U, W).status.value)""")
    report("6 |Q|,|K| ~ 1e160, upper witness", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
