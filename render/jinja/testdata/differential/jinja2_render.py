#!/usr/bin/env python3
"""Renders every case of the differential corpus with the real Jinja2 (the default
Environment, with the loopcontrols and do extensions the engine also accepts).

Input on stdin: {"context": {...}, "cases": [{"name": ..., "templates": {key: text}}]}.
Output on stdout: one result per case: {"out": text} or {"err": message, "type": class, "line":
the line Jinja2 reports (0: none)}.
The context's dicts iterate in sorted key order, as the engine iterates dicts from the data.
"""
import json
import sys

import jinja2


def sorted_dict(pairs):
    return dict(sorted(pairs))


def main():
    req = json.load(sys.stdin, object_pairs_hook=sorted_dict)
    ctx = req["context"]
    results = []
    for case in req["cases"]:
        env = jinja2.Environment(
            loader=jinja2.DictLoader(case["templates"]),
            extensions=["jinja2.ext.loopcontrols", "jinja2.ext.do"],
        )
        try:
            out = env.get_template("t").render(**json.loads(json.dumps(ctx), object_pairs_hook=sorted_dict))
            results.append({"out": out})
        except Exception as e:  # noqa: BLE001 - any error is a result to compare
            results.append({"err": str(e), "type": type(e).__name__, "line": getattr(e, "lineno", None) or 0})
    json.dump({"version": jinja2.__version__, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
