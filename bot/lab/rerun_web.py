"""The dashboard's files of a lab rerun: its samples as CSV and its plot as SVG.

``GET /regressions/{rid}/reruns/{job}/samples.csv`` (:func:`bot.lab.verdict_report.samples_csv`:
``run,build,sample,value`` in the order the lab ran them) and ``.../samples.svg``
(:func:`bot.web.svg.samples_svg`, the plot of the record's page as a file); 404 when the record
has no finished rerun with that id.  Verdict messages link to both (``[web] base_url``).
"""

from __future__ import annotations

from typing import Any, Callable

from bot.lab.verdict_report import samples_csv
from bot.web.svg import samples_svg


def rerun_routes(store, source: Callable[[Any, int], list[dict[str, Any]]]) -> list:
    """Starlette routes over ``source(store, rid)`` (the reruns the record's page shows)."""
    from starlette.exceptions import HTTPException
    from starlette.responses import Response
    from starlette.routing import Route

    def find(request) -> dict[str, Any]:
        rid, job = request.path_params["rid"], request.path_params["job"]
        for r in source(store, rid) or []:
            if isinstance(r, dict) and r.get("id") == job:
                return r
        raise HTTPException(404, f"regression record {rid} has no rerun {job}")

    def csv(request):
        r = find(request)
        name = f"regression-{int(request.path_params['rid'])}-rerun-{int(r['id'])}.csv"
        return Response(samples_csv(r), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'inline; filename="{name}"'})

    def svg(request):
        return Response(samples_svg(find(request)), media_type="image/svg+xml")

    return [Route("/regressions/{rid:int}/reruns/{job:int}/samples.csv", csv, methods=["GET", "HEAD"]),
            Route("/regressions/{rid:int}/reruns/{job:int}/samples.svg", svg, methods=["GET", "HEAD"])]
