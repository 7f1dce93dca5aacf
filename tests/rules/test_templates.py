"""Unit tests of kue_rules.template: Resc's ``${name}`` placeholders, checked at load and
filled per event."""

from __future__ import annotations

import pytest

from kue_core import KueError
from kue_rules.template import JSON, TEXT, Template, TemplateError, Tree, lookup, text_of

KNOWN = {"input_task": TEXT, "process_id": TEXT, "child": JSON, "n": JSON}
VARS = {
    "input_task": "acq/1/abc",
    "process_id": "1",
    "child": {
        "processId": 7,
        "productId": "p7",
        "ok": True,
        "none": None,
        "tags": ["a", "b"],
        "meta": {"depth": 2, "by": {"name": "x"}},
        "ratio": 0.5,
    },
    "n": 12,
}


def render(text: str) -> str:
    return Template(text, KNOWN).render(VARS)


def test_text_values_go_in_as_they_are() -> None:
    assert render("trt/${process_id}/todo-queue") == "trt/1/todo-queue"
    assert render("${input_task}") == "acq/1/abc"
    assert render("${ process_id }") == "1"  # spaces inside are allowed
    assert render("no placeholder") == "no placeholder"
    assert render("${process_id}${process_id}") == "11"
    assert render("$process_id {process_id} $") == "$process_id {process_id} $"


def test_json_values_are_written_as_json() -> None:
    assert render("trt/${child.processId}") == "trt/7"
    assert render("${n}") == "12"
    assert render("${child.ok}/${child.none}/${child.ratio}") == "true/null/0.5"
    assert render("${child.meta}") == '{"depth":2,"by":{"name":"x"}}'
    assert render("${child.tags}") == '["a","b"]'
    assert text_of({"é": "ü"}) == '{"é":"ü"}'  # not escaped


def test_dotted_and_indexed_access() -> None:
    assert render("${child.meta.by.name}") == "x"
    assert render("${child.tags.1}") == "b"
    assert render("${child.meta.depth}") == "2"
    assert lookup(VARS, "child.tags.0") == "a"
    assert lookup(VARS, ["child", "meta", "depth"]) == 2


def test_a_whole_placeholder_gives_the_raw_value_in_job_data() -> None:
    t = Template("${child.meta}", KNOWN)
    assert t.whole and t.value(VARS) == {"depth": 2, "by": {"name": "x"}}
    assert Template("${n}", KNOWN).value(VARS) == 12
    assert Template("n=${n}", KNOWN).value(VARS) == "n=12"  # not whole: text
    assert not Template("plain", KNOWN).whole
    tree = Tree(
        {
            "id": "${child.processId}",
            "name": "product ${child.productId}",
            "raw": ["${child.tags}", 3, None, {"deep": "${child.ok}"}],
            "event": "${input_task}",
            "const": True,
        },
        KNOWN,
    )
    assert tree.render(VARS) == {
        "id": 7,
        "name": "product p7",
        "raw": [["a", "b"], 3, None, {"deep": True}],
        "event": "acq/1/abc",
        "const": True,
    }


def test_a_missing_field_fails_at_render_naming_it() -> None:
    t = Template("trt/${child.processID}", KNOWN)  # the service's field is processId
    with pytest.raises(
        TemplateError, match=r"\$\{child\.processID\}: child has no field 'processID'"
    ):
        t.render(VARS)
    with pytest.raises(TemplateError, match=r"child\.tags has no field '5'"):
        Template("${child.tags.5}", KNOWN).render(VARS)
    with pytest.raises(TemplateError, match=r"child\.meta\.depth has no field 'x'"):
        Template("${child.meta.depth.x}", KNOWN).render(VARS)
    with pytest.raises(TemplateError, match=r"no field 'nope'"):
        Tree({"a": ["${child.nope}"]}, KNOWN).render(VARS)
    assert issubclass(TemplateError, KueError)


def test_load_time_checks() -> None:
    with pytest.raises(
        TemplateError,
        match=r"no variable 'nope' \(this rule has: child, input_task, n, process_id\)",
    ):
        Template("a/${nope}", KNOWN)
    with pytest.raises(TemplateError, match="process_id is text, it has no fields"):
        Template("${process_id.x}", KNOWN)
    with pytest.raises(TemplateError, match="not a \\$\\{name\\} placeholder"):
        Template("${child..x}", KNOWN)
    with pytest.raises(TemplateError, match="not a \\$\\{name\\} placeholder"):
        Template("${}", KNOWN)
    with pytest.raises(TemplateError, match="does not close"):
        Template("a/${child", KNOWN)
    with pytest.raises(TemplateError, match="no variable 'nope'"):
        Tree({"k": ["x", {"y": "${nope}"}]}, KNOWN)
    assert Template("${child.tags.0}", KNOWN).paths == [["child", "tags", "0"]]
