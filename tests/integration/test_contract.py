"""The API contract: docs/openapi.json against the code and the live daemon.
The routes in src/daemon/api/api.c's routes[] table and the paths of the
document must be the same set; the document must be well-formed OpenAPI 3.0
with every $ref resolving; and the parameterless GET routes of the running
coved must answer what the document says they answer."""
import json
import os
import re

import covetest

API_C = os.path.join(covetest.ROOT, "src", "daemon", "api", "api.c")
OPENAPI = os.path.join(covetest.ROOT, "docs", "openapi.json")
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def _doc():
    with open(OPENAPI) as f:
        return json.load(f)


def _code_routes():
    """{(METHOD, path)} from routes[], '*' segments written as '{id}'."""
    with open(API_C) as f:
        src = f.read()
    table = re.search(r"\broutes\s*\[\s*\]\s*=\s*\{(.*?)\n\s*\}\s*;", src, re.S)
    assert table, "no routes[] table found in " + API_C
    # Drop comments, but not what looks like one inside a string ("/v1/x/*/y").
    body = re.sub(r'("(?:\\.|[^"\\])*")|/\*.*?\*/|//[^\n]*', lambda m: m.group(1) or " ", table.group(1),
                  flags=re.S)
    entries = re.findall(r"\{\s*(?:EVHTTP_REQ_|HTTP_)([A-Z]+)\s*(?:\|\s*STREAMING\s*)?,\s*\"([^\"]*)\"\s*,\s*\w+\s*\}", body)
    # Every '{' entry of the table must have been understood.
    assert len(entries) == body.count("{"), ("routes[] entries the regex did not parse", body)
    routes = set()
    for method, pattern in entries:
        path = "/".join("{id}" if seg == "*" else seg for seg in pattern.split("/"))
        routes.add((method, path))
    assert routes, "routes[] is empty"
    return routes


def _doc_routes(doc):
    """{(METHOD, path)}, every {parameter} written as '{id}' as in _code_routes."""
    return {(m.upper(), re.sub(r"\{[^}]*\}", "{id}", path)) for path, item in doc["paths"].items() for m in item
            if m in METHODS}


def _resolve(doc, ref):
    assert ref.startswith("#/"), "only local $refs are expected: " + ref
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict) and part in node, "unresolved $ref " + ref
        node = node[part]
    return node


def _deref(doc, node, seen=()):
    while isinstance(node, dict) and "$ref" in node:
        assert node["$ref"] not in seen, "$ref cycle at " + node["$ref"]
        seen += (node["$ref"],)
        node = _resolve(doc, node["$ref"])
    return node


def _refs(node, where="#"):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield where, v
            else:
                yield from _refs(v, where + "/" + k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _refs(v, "%s/%d" % (where, i))


def test_routes_match_the_document(cv):
    code, doc = _code_routes(), _doc_routes(_doc())
    missing = sorted(code - doc)
    extra = sorted(doc - code)
    assert not missing and not extra, (
        "docs/openapi.json is out of step with src/daemon/api/api.c routes[]:\n"
        "  in the code, not in the document: %s\n  in the document, not in the code: %s"
        % (["%s %s" % r for r in missing] or "none", ["%s %s" % r for r in extra] or "none"))


def test_document_is_well_formed(cv):
    with open(OPENAPI) as f:
        text = f.read()
    doc = json.loads(text)  # valid JSON, or this raises
    assert isinstance(doc, dict)
    assert re.fullmatch(r"3\.0\.\d+", str(doc.get("openapi", ""))), doc.get("openapi")
    info = doc.get("info")
    assert isinstance(info, dict) and info.get("title") and info.get("version"), info
    assert "unix" in info.get("description", "").lower(), "info.description must say the API is on a unix socket"
    assert isinstance(doc.get("paths"), dict) and doc["paths"], "no paths"
    ops, shared_errors = 0, set()
    for path, item in doc["paths"].items():
        assert path.startswith("/"), path
        declared = [_deref(doc, p) for p in item.get("parameters", [])]
        for method, op in item.items():
            if method not in METHODS:
                continue
            ops += 1
            name = "%s %s" % (method.upper(), path)
            responses = op.get("responses")
            assert isinstance(responses, dict) and responses, name + " has no responses"
            for status, r in responses.items():
                assert re.fullmatch(r"[1-5][0-9][0-9]|[1-5]XX|default", status), (name, status)
                assert "description" in _deref(doc, r), (name, status, "no description")
                if r.get("$ref", "").startswith("#/components/responses/"):
                    shared_errors.add(status)
            # Every {param} of the path is a declared, required path parameter.
            params = declared + [_deref(doc, p) for p in op.get("parameters", [])]
            in_path = {p["name"] for p in params if p.get("in") == "path" and p.get("required") is True}
            for want in re.findall(r"\{([^}]+)\}", path):
                assert want in in_path, "%s: path parameter '%s' is not declared" % (name, want)
    assert ops > 0
    # The error shape's statuses are shared components/responses.
    want = {"400", "404", "409", "413", "429", "500"}
    assert want <= shared_errors, "not used as components/responses: %s" % sorted(want - shared_errors)
    bad = [(where, ref) for where, ref in _refs(doc) if not _resolves(doc, ref)]
    assert not bad, "unresolved $refs: %s" % bad


def _resolves(doc, ref):
    try:
        _resolve(doc, ref)
        return True
    except AssertionError:
        return False


def _required(doc, s):
    """The required properties of a schema, through $refs and allOf."""
    s = _deref(doc, s)
    req = set(s.get("required", []))
    for sub in s.get("allOf", []):
        req |= _required(doc, sub)
    return req


def test_live_get_routes_answer_as_documented(cv):
    doc = _doc()
    checked = []
    for path, item in doc["paths"].items():
        op = item.get("get")
        if op is None or "{" in path or item.get("parameters") or op.get("parameters"):
            continue
        content = _deref(doc, op["responses"]["200"]).get("content", {})
        if "text/plain" in content:  # /metrics: Prometheus text (test_usage parses it)
            c = cv.conn()
            c.request("GET", path)
            r = c.getresponse()
            assert r.status == 200 and r.getheader("Content-Type").startswith("text/plain"), (path, r.status)
            r.read()
            c.close()
            checked.append(path)
            continue
        assert "application/json" in content, path + ": no application/json 200 response"
        required = _required(doc, content["application/json"]["schema"])
        assert required, path + ": the 200 schema lists no required properties"
        st, body = cv.api("GET", path)
        assert st == 200, (path, st, body)
        assert isinstance(body, dict), (path, body)
        assert required <= set(body), "%s: missing %s in %s" % (path, sorted(required - set(body)), body)
        checked.append(path)
    assert {"/v1/health", "/v1/capabilities", "/v1/sandboxes"} <= set(checked), checked
