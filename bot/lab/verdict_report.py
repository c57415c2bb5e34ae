"""What a verdict message says about a lab rerun (pure: no I/O).

Every text that reports a rerun's verdict -- the reply drafted to the list
(``templates/reply.txt.j2``), the tracker entry (``templates/entry.*.j2`` include
``rerun.txt.j2`` / ``rerun.md.j2``), the chat notification (Matrix: the entry; IRC:
``templates/verdict_irc.txt.j2``) -- is rendered from :func:`summarize` of one rerun (a dict of
:mod:`bot.lab.reruns`).  It states:

* the machine, and that it is emulated where so (its samples time an emulated CPU), and that
  it is only a stand-in where the report named no hardware to match;
* the kernels: the good and the bad build (the record's refs and what the lab booted);
* the recipe and its parameters, the metric and its direction;
* n per side, each side's median, the change with its repeated confidence interval and
  that interval's level, the CV (the noisier side's);
* the samples: :func:`samples_csv` (inline in the mail; ``samples.csv`` on the dashboard) and
  the plot (``samples.svg`` on the dashboard, :func:`bot.web.svg.samples_svg`);
* a ``statement`` that claims exactly what the interval says, never more: "not reproduced"
  is "a regression larger than X% is ruled out on this machine (a smaller one is not)", and
  an inconclusive rerun says how large a regression its interval still allows.

Values are numbers formatted here or strings from the lab's own configuration and the record
(the templates' environments clean or escape them: bot.tracker.entry).
"""

from __future__ import annotations

import math
from typing import Any

VERDICT_EVENTS = ("confirmed", "improved", "not-reproduced", "inconclusive")


def _f(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _median(xs: list[float]) -> float | None:
    s = sorted(v for v in (_f(x) for x in xs) if v is not None)
    if not s:
        return None
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def num(v: Any) -> str:
    """A measured value, 4 significant digits (no exponent for ordinary magnitudes)."""
    x = _f(v)
    if x is None:
        return "n/a"
    if x == 0:
        return "0"
    a = abs(x)
    if a >= 1e4:
        return f"{x:,.0f}"
    if a >= 1e-3:
        return f"{x:.4g}"
    return f"{x:.3e}"


def pct(v: Any, digits: int = 1) -> str:
    x = _f(v)
    return "n/a" if x is None else f"{x:+.{digits}f}%"


def regression_bound(ci: tuple[float, float] | None, higher_is_better: bool) -> float | None:
    """The largest regression (as a positive %) the interval still allows; 0 when the whole
    interval lies on the improvement side; None without an interval."""
    if not ci or _f(ci[0]) is None or _f(ci[1]) is None:
        return None
    worst = -ci[0] if higher_is_better else ci[1]
    return max(worst, 0.0)


def _orderly(r: dict[str, Any]) -> list[tuple[int, str, int, float]]:
    """(run, build, sample of that build, value) in the order the lab ran them when the job
    recorded it (``order``: one build label per sample), else good first."""
    s = r.get("samples") or {}
    good = [v for v in (_f(x) for x in s.get("good") or []) if v is not None]
    bad = [v for v in (_f(x) for x in s.get("bad") or []) if v is not None]
    order = [o for o in (r.get("order") or []) if o in ("good", "bad")]
    if order.count("good") != len(good) or order.count("bad") != len(bad):
        order = ["good"] * len(good) + ["bad"] * len(bad)
    it = {"good": iter(good), "bad": iter(bad)}
    seen = {"good": 0, "bad": 0}
    out = []
    for i, b in enumerate(order, 1):
        seen[b] += 1
        out.append((i, b, seen[b], next(it[b])))
    return out


def samples_csv(r: dict[str, Any]) -> str:
    """The judged samples as CSV: ``run,build,sample,value`` (run: position in the order the
    lab ran them; sample: the n-th of that build).  Warm-ups are not judged and not listed."""
    rows = ["run,build,sample,value"]
    rows += [f"{i},{b},{k},{v!r}" for i, b, k, v in _orderly(r)]
    return "\n".join(rows) + "\n"


def rerun_paths(rid: Any, job_id: Any) -> dict[str, str] | None:
    """Dashboard paths (below ``[web] base_url``) of a rerun's samples and plot."""
    try:
        rid, job_id = int(rid), int(job_id)
    except (TypeError, ValueError):
        return None
    base = f"/regressions/{rid}/reruns/{job_id}"
    return {"csv": f"{base}/samples.csv", "svg": f"{base}/samples.svg"}


def _kernel(refs: dict, builds: dict, side: str) -> str:
    ref, build = refs.get(side), builds.get(side)
    if ref and build and str(ref) not in str(build):
        return f"{ref} ({build})"
    return str(build or ref or "?")


def statement(v: dict[str, Any]) -> str:
    """One sentence that claims what the rerun's interval says and nothing more."""
    verdict, metric = v["verdict"], v["metric"] or "the metric"
    level, lo, hi = v["ci_level_text"], v["ci"][0], v["ci"][1]
    interval = f"{level} interval {pct(lo)} .. {pct(hi)}" if v["has_ci"] else "no interval"
    where = f"on {v['machine']}" + (" (emulated)" if v["emulated"] else "")
    bound, claimed = v["regression_bound"], v["claimed"]
    n = f"{v['n_good']}+{v['n_bad']} runs"
    if verdict == "confirmed":
        return (f"reproduced {where}: {metric} changed by {pct(v['change'])} on the bad kernel ({interval}, "
                f"{n}); the whole interval lies on the regression side")
    if verdict == "improved":
        return (f"not a regression {where}: the bad kernel was better, {metric} {pct(v['change'])} ({interval}, "
                f"{n})")
    if verdict == "not-reproduced":
        if bound is not None and bound > 0:
            rules = (f"a regression larger than {bound:.1f}% is ruled out on this machine; a smaller one is not"
                     + (f" (the report claimed {abs(claimed):.1f}%)" if claimed else ""))
        else:
            rules = "the interval lies wholly on the improvement side: no regression is seen on this machine"
        return f"not reproduced {where}: {metric} changed by {pct(v['change'])} ({interval}, {n}); {rules}"
    allows = (f"; the interval still allows a regression of up to {bound:.1f}%" if bound else "")
    return (f"undecided {where}: {metric} changed by {pct(v['change'])} ({interval}, {n}){allows}; "
            f"{v['reason'] or 'no reason recorded'}")


def summarize(r: dict[str, Any]) -> dict[str, Any]:
    """The figures and wording of one rerun (a dict of :mod:`bot.lab.reruns`) for the templates."""
    s = r.get("samples") or {}
    good, bad = list(s.get("good") or []), list(s.get("bad") or [])
    hib = r.get("higher_is_better")
    hib = True if hib is None else bool(hib)
    ci = r.get("ci")
    has_ci = bool(ci) and _f(ci[0]) is not None and _f(ci[1]) is not None
    ci_t = (float(ci[0]), float(ci[1])) if has_ci else (None, None)
    level = _f(r.get("ci_level"))
    if level is None and _f(r.get("alpha")) is not None:
        level = 1 - float(r["alpha"])
    level_text = f"{level * 100:g}% repeated confidence" if level is not None else "confidence"
    refs, builds = r.get("refs") or {}, r.get("builds") or {}
    params = r.get("recipe_params") or {}
    reasons = [str(x) for x in r.get("reasons") or []]
    n_good = r.get("n_good") if r.get("n_good") is not None else len(good)
    n_bad = r.get("n_bad") if r.get("n_bad") is not None else len(bad)
    med_g = _f(r.get("median_good"))
    med_b = _f(r.get("median_bad"))
    v = {
        "id": r.get("id"),
        "verdict": r.get("verdict") or "no verdict",
        "machine": r.get("machine") or "?",
        "backend": r.get("backend"),
        "emulated": bool(r.get("emulated")),
        "emulated_known": r.get("emulated") is not None,
        "stand_in": bool(r.get("stand_in")),
        "kernel_good": _kernel(refs, builds, "good"),
        "kernel_bad": _kernel(refs, builds, "bad"),
        "ref_good": str(refs.get("good") or builds.get("good") or "?"),
        "ref_bad": str(refs.get("bad") or builds.get("bad") or "?"),
        "recipe": r.get("recipe") or "?",
        "recipe_params": " ".join(f"{k}={params[k]}" for k in sorted(params)),
        "metric": r.get("metric"),
        "direction": "higher is better" if hib else "lower is better",
        "higher_is_better": hib,
        "n_good": n_good,
        "n_bad": n_bad,
        "median_good": num(med_g if med_g is not None else _median(good)),
        "median_bad": num(med_b if med_b is not None else _median(bad)),
        "change": _f(r.get("change_percent")),
        "change_text": pct(r.get("change_percent"), 2),
        "ci": ci_t,
        "has_ci": has_ci,
        "ci_text": f"{pct(ci_t[0], 2)} .. {pct(ci_t[1], 2)}" if has_ci else "n/a",
        "ci_level_text": level_text,
        "cv_text": f"{float(r['cv_percent']):.1f}%" if _f(r.get("cv_percent")) is not None else "n/a",
        "look": r.get("look"),
        "looks": list(r.get("looks") or []),
        "claimed": _f(r.get("claimed_change_percent")),
        "regression_bound": regression_bound(ci_t if has_ci else None, hib),
        "reason": reasons[0] if reasons else None,
        "reasons": reasons,
        "finished": r.get("finished"),
        "paths": rerun_paths(r.get("regression_id"), r.get("id")),
    }
    v["statement"] = statement(v)
    return v


def latest(e: dict[str, Any]) -> dict[str, Any] | None:
    """The summary of the entry's newest finished rerun (the one a verdict event is about)."""
    runs = [r for r in e.get("reruns") or [] if isinstance(r, dict) and r.get("verdict")]
    if not runs:
        return None
    r = dict(runs[-1])
    r.setdefault("regression_id", e.get("id"))
    return summarize(r)


def summaries(e: dict[str, Any]) -> list[dict[str, Any]]:
    """:func:`summarize` of each finished rerun of the entry, oldest first."""
    out = []
    for r in e.get("reruns") or []:
        if isinstance(r, dict):
            r = dict(r)
            r.setdefault("regression_id", e.get("id"))
            out.append(summarize(r))
    return out


def link(base_url: str | None, path: str | None) -> str | None:
    """``base_url`` + a dashboard path, or None."""
    if not base_url or not path:
        return None
    return base_url.rstrip("/") + path
