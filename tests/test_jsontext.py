"""JSON edited in place: the new value, written into the old text with only the parts that changed changed."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from gitmem.jsontext import edit, has_comments

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, width=16),
                     st.text("aü✓\"\\/", max_size=3))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text("ab", max_size=2), inner, max_size=4)),
                       max_leaves=12)
_documents = st.dictionaries(st.text("abcd", max_size=2), _values, min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(_documents, _documents, st.sampled_from([2, 4, "\t"]), st.booleans(), st.booleans())
def test_an_edit_holds_the_new_value_in_the_file_s_line_ends_and_changes_nothing_when_nothing_changed(
        old, new, indent, final_newline, crlf):
    text = json.dumps(old, indent=indent, ensure_ascii=False) + ("\n" if final_newline else "")
    text = text.replace("\n", "\r\n") if crlf else text
    out = edit(text, new)
    assert json.dumps(json.loads(out), sort_keys=True) == json.dumps(new, sort_keys=True)  # the file's key order
    assert edit(text, old) == text and edit(out, new) == out
    assert out.endswith("\n") == final_newline
    assert crlf or "\r" not in out
    assert not crlf or "\n" not in out.replace("\r\n", "")


@settings(max_examples=200, deadline=None)
@given(_documents, _documents)
def test_a_member_whose_value_stays_keeps_its_one_line_layout(old, new):
    members = [f"  {json.dumps(k)}:  {json.dumps(v, ensure_ascii=False)}" for k, v in old.items()]
    text = "{\n" + ",\n".join(members) + "\n}\n"
    out = edit(text, new)
    assert json.dumps(json.loads(out), sort_keys=True) == json.dumps(new, sort_keys=True)  # the file's key order
    for key, member in zip(old, members):
        if key in new and json.dumps(new[key]) == json.dumps(old[key]):
            assert member in out


def test_values_python_calls_equal_but_json_writes_apart_are_changes():
    """0.0 and -0.0, 1 and 1.0 and true: equal to Python's ``==``, written differently, so an edit between them
    writes the new value (hypothesis found -0.0 kept as 0.0)."""
    for old, new in ((0.0, -0.0), (1, 1.0), (1, True), (-0.0, 0.0)):
        out = edit('{\n  "a": ' + json.dumps(old) + "\n}\n", {"a": new})
        assert json.dumps(json.loads(out)) == json.dumps({"a": new}), (old, new, out)


def test_new_keys_go_last_in_the_indent_of_their_neighbours_and_an_emptied_object_closes_up():
    text = '{\n    "b": [1, 2],\n    "a": {"x": true}\n}'
    assert edit(text, {"b": [1, 2], "a": {"x": True}, "c": {"d": [3]}}) == (
        '{\n    "b": [1, 2],\n    "a": {"x": true},\n    "c": {\n        "d": [\n            3\n        ]\n    }\n}')
    assert edit(text, {"b": [1, 2, 4], "a": {}}) == '{\n    "b": [1, 2, 4],\n    "a": {}\n}'
    assert edit('{\n\t"s": {}\n}\n', {"s": {"k": "é"}}) == '{\n\t"s": {\n\t\t"k": "é"\n\t}\n}\n'
    assert edit(text, {}) == "{}"
    assert edit('{\n  "p": {"a": {}, "b": []}\n}', {"p": {"a": {"k": 1}, "b": [2]}}) == \
        '{\n  "p": {"a": {"k": 1}, "b": [2]}\n}'  # inside a one-line object, on its line
    assert edit(None, {"a": 1}) == edit("", {"a": 1}) == '{\n  "a": 1\n}\n'
    assert edit('{"a": 1}', {"a": 1, "b": 2}) == '{\n  "a": 1,\n  "b": 2\n}'  # one line: laid out anew


def test_an_array_keeps_the_elements_that_stay_and_edits_one_that_changed_in_place():
    text = '[\n  {"m": "Edit", "h": [1]},\n  {"m": "Bash",  "h": [2, 3]},\n  {"m": "Read", "h": [4]}\n]\n'
    assert edit(text, [{"m": "Edit", "h": [1]}, {"m": "Bash", "h": [3]}, {"m": "Read", "h": [4]}]) == \
        '[\n  {"m": "Edit", "h": [1]},\n  {"m": "Bash",  "h": [3]},\n  {"m": "Read", "h": [4]}\n]\n'
    assert edit(text, [{"m": "Edit", "h": [1]}, {"m": "Read", "h": [4]}]) == \
        '[\n  {"m": "Edit", "h": [1]},\n  {"m": "Read", "h": [4]}\n]\n'


def test_comments_are_found_outside_strings_only():
    assert has_comments('{\n  // note\n  "a": 1\n}') and has_comments('{"a": 1 /* note */}')
    assert not has_comments('{"url": "https://example.com/a//b", "q": "\\" // still a string"}')
