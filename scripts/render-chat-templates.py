#!/usr/bin/env python3
"""Renders the fixture chat templates with Python's jinja2, configured the way transformers'
apply_chat_template configures it, for every case of tests/data/chat_templates/cases.json, and
writes the renders (or the template's error) to tests/data/chat_templates/expected.json.
tern's chat template test must reproduce them byte for byte.

usage: TERN_FIXTURES=/path/to/fixtures scripts/render-chat-templates.py
needs: python3-jinja2 (Debian), nothing else.
"""
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "chat_templates")
FIXTURES = os.environ.get("TERN_FIXTURES") or os.path.join(ROOT, "..", "shared", "fixtures")


def environment():
    # transformers (utils/chat_template_utils.py): sandboxed, immutable, trim/lstrip blocks,
    # loopcontrols, its own tojson (json.dumps, ensure_ascii=False), raise_exception and
    # strftime_now. The cases pass date_string so no render depends on the clock.
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        raise RuntimeError("a case renders strftime_now; pass date_string instead")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def load_template(entry):
    path = os.path.join(FIXTURES, entry["fixture"])
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not path.endswith(".json"):
        return text, entry.get("bos_token"), entry.get("eos_token")
    config = json.loads(text)
    template = config["chat_template"]
    if isinstance(template, list):
        template = next(t["template"] for t in template if t["name"] == "default")
    token = lambda v: v["content"] if isinstance(v, dict) else v
    return template, token(config.get("bos_token")), token(config.get("eos_token"))


def main():
    with open(os.path.join(DATA, "cases.json"), encoding="utf-8") as f:
        spec = json.load(f)
    env = environment()
    expected = {}
    for entry in spec["templates"]:
        source, bos, eos = load_template(entry)
        template = env.from_string(source)
        renders = {}
        for case in spec["cases"]:
            context = {"messages": case["messages"], "tools": None, "documents": None,
                       "add_generation_prompt": case["add_generation_prompt"]}
            if bos:
                context["bos_token"] = bos
            if eos:
                context["eos_token"] = eos
            context.update(spec.get("common_kwargs", {}))
            context.update(case.get("kwargs", {}))
            try:
                renders[case["name"]] = {"text": template.render(**context)}
            except jinja2.exceptions.TemplateError as e:
                renders[case["name"]] = {"error": str(e)}
        expected[entry["name"]] = renders
    out = os.path.join(DATA, "expected.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {out}: {len(spec['templates'])} templates x {len(spec['cases'])} cases, jinja2 {jinja2.__version__}")


if __name__ == "__main__":
    sys.exit(main())
