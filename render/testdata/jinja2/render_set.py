#!/usr/bin/env python3
"""Renders a template set with the real Jinja2, as the renderer renders it: the context's
dicts iterate in sorted key order, and the renderer's extra filters (hquote, re_escape) exist.

Input on stdin: {"templates": {key: text}, "main": key, "context": {...}}; output: the text.
"""
import json
import re
import sys

import jinja2


def hquote(s):
    s = str(s)
    if "\n" in s or "\r" in s:
        raise ValueError("an HAProxy argument cannot contain a newline")
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


req = json.load(sys.stdin, object_pairs_hook=lambda p: dict(sorted(p)))
env = jinja2.Environment(loader=jinja2.DictLoader(req["templates"]), extensions=["jinja2.ext.loopcontrols", "jinja2.ext.do"])
env.filters["hquote"] = hquote
env.filters["re_escape"] = re.escape
sys.stdout.write(env.get_template(req["main"]).render(**req["context"]))
