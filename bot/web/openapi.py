"""The OpenAPI 3.1 description of the JSON API (``GET /openapi.json``)."""

from __future__ import annotations

from typing import Any

from bot import __version__
from bot.tracker.query import CLOSED, KINDS, STATUSES
from bot.web.search import DEFAULT_LIMIT, MAX_LIMIT

STR = {"type": "string"}  # schema shorthands: a string; a string or null; a number or null; a commit link
NSTR = {"type": ["string", "null"]}
NNUM = {"type": ["number", "null"]}
LINK = {"type": ["object", "null"], "properties": {"commit": NSTR, "subject": NSTR, "url": NSTR, "tree": NSTR}}


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 description of the JSON API."""
    error = {"type": "object", "required": ["error"], "properties": {"error": STR}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "regtriage", "version": __version__,
                 "description": "Read-only API of the regtriage regression tracker for Linux kernel mailing lists."},
        "paths": _paths(),
        "components": {"schemas": {"Regression": _regression_schema(), "Rerun": _rerun_schema(), "Error": error}},
    }


def _rerun_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "A confirmation rerun in the lab: samples of both builds and the verdict.",
        "properties": {
            "id": {"type": ["integer", "string"]}, "machine": NSTR, "recipe": NSTR, "metric": NSTR,
            "higher_is_better": {"type": ["boolean", "null"]},
            "verdict": {"type": ["string", "null"], "enum": ["confirmed", "improved", "not-reproduced", "inconclusive", None]},
            "change_percent": NNUM,
            "ci": {"type": ["array", "null"], "items": {"type": "number"}, "minItems": 2, "maxItems": 2,
                   "description": "confidence interval of the % change"},
            "p_value": NNUM,
            "samples": {"type": "object", "properties": {"good": {"type": "array", "items": {"type": "number"}},
                                                         "bad": {"type": "array", "items": {"type": "number"}}}},
            "order": {"type": "array", "items": {"enum": ["good", "bad"]},
                      "description": "which build each run used, in run order"},
            "finished": NSTR,
        },
    }


def _regression_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "A tracker entry (bot.tracker.entry.build_entry): the same document as "
                       "`regtriage query --json`.",
        "required": ["id", "title", "status", "open", "kind", "subsystem", "culprit", "range", "metric",
                     "change_percent", "hardware", "config", "numbers", "report", "related", "reruns",
                     "history", "updated"],
        "properties": {
            "id": {"type": "integer"}, "title": STR,
            "status": {"type": "string", "enum": list(STATUSES)},
            "open": {"type": "boolean", "description": f"status not in {', '.join(CLOSED)}"},
            "kind": {"type": ["string", "null"], "enum": [*KINDS, None]},
            "subsystem": NSTR, "culprit": LINK,
            "range": {"type": "object", "properties": {"good": NSTR, "bad": NSTR}},
            "metric": NSTR, "change_percent": NNUM,
            "hardware": {"type": "object"}, "config": {"type": "object"},
            "numbers": {"type": "array", "items": {"type": "object"}},
            "report": {"type": "object", "properties": {"message_id": NSTR, "url": NSTR}},
            "related": {"type": "array", "items": {"type": "object", "properties": {
                "relation": STR, "message_id": NSTR, "url": NSTR, "subject": NSTR, "from": NSTR, "date": NSTR,
                "counts_as_activity": {"type": "boolean"}}}},
            "reruns": {"type": "array", "items": {"$ref": "#/components/schemas/Rerun"}},
            "bisections": {"type": "array", "items": {"type": "object"}},  # bot.lab.bisection.summary
            "history": {"type": "array", "items": {"type": "object", "properties": {
                "at": NSTR, "field": STR, "old": NSTR, "new": NSTR, "actor": NSTR, "message_id": NSTR, "source": NSTR,
                "note": NSTR}}},
            "updated": NSTR, "created": NSTR, "title_source": NSTR,
            "duplicate_of": {"type": ["integer", "null"]},
            "duplicates": {"type": "array", "items": {"type": "integer"}},
            "fix": LINK, "set_by": {"type": "object"}, "evidence": {"type": "object",
                                                                     "additionalProperties": {"type": "string"}},
            "confidence": NNUM,
        },
    }


def _param(name, desc, schema=None, where="query"):
    return {"name": name, "in": where, "required": where == "path", "description": desc,
            "schema": schema or {"type": "string"}}


def _paths() -> dict[str, Any]:
    err = {"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    return {
        "/api/regressions": {"get": {
            "operationId": "listRegressions",
            "summary": "Search regression records",
            "description": "`q` is the query language of `regtriage query` (natural language and filters "
                           "such as `status:open subsystem:mm/ kind:performance culprit:54a6eb5c since:v6.8 "
                           "text:zonelist`); the other parameters narrow the result further.  Most recently "
                           "updated first.  The body equals `regtriage query --json` for the same `q`.",
            "parameters": [
                _param("q", "query (natural language and/or filter language)"),
                _param("status", "open, closed, all, or a status (comma-separated)"),
                _param("subsystem", "path prefix, e.g. mm/ or fs/xfs"),
                _param("kind", "performance or functional", {"type": "string", "enum": list(KINDS)}),
                _param("text", "substring of title, culprit subject or metric"),
                _param("limit", "page size", {"type": "integer", "minimum": 0, "maximum": MAX_LIMIT,
                                             "default": DEFAULT_LIMIT}),
                _param("offset", "records to skip", {"type": "integer", "minimum": 0, "default": 0}),
            ],
            "responses": {
                "200": {"description": "tracker entries",
                        "headers": {"X-Total-Count": {"description": "records matching",
                                                      "schema": {"type": "integer"}},
                                    "Link": {"description": "next page (rel=next)", "schema": {"type": "string"}}},
                        "content": {"application/json": {"schema": {
                            "type": "array", "items": {"$ref": "#/components/schemas/Regression"}}}}},
                "400": err,
            }}},
        "/api/regressions/{id}": {"get": {
            "operationId": "getRegression",
            "summary": "One regression record",
            "parameters": [_param("id", "record id", {"type": "integer"}, "path")],
            "responses": {"200": {"description": "the tracker entry", "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Regression"}}}}, "404": err},
        }},
        "/feed.atom": {"get": {"operationId": "feed", "summary": "Atom feed of new and confirmed regressions",
                               "responses": {"200": {"description": "Atom 1.0",
                                                     "content": {"application/atom+xml": {"schema": STR}}}}}},
        "/healthz": {"get": {"operationId": "health", "summary": "Liveness: ok when the database answers",
                             "responses": {"200": {"description": "ok", "content": {"text/plain": {"schema": STR}}},
                                           "503": {"description": "database unavailable"}}}},
    }
