from __future__ import annotations

import pytest

from hrag_pg.errors import IngestError
from hrag_pg.ingest.code import parse_python

from .ingest_checks import FIXTURES, assert_leaves_nonempty, assert_text_preserved, find

SOURCE = (FIXTURES / "module.py").read_text(encoding="utf-8")


def tree():
    return parse_python(SOURCE, "shop/module.py")


def test_module_has_docstring_code_classes_and_function_in_order() -> None:
    children = tree().root.children
    assert [(c.kind, c.key) for c in children] == [
        ("paragraph", "__doc__"),
        ("code", None),
        ("class", "Item"),
        ("class", "Inventory"),
        ("function", "total_value"),
        ("code", None),
    ]
    assert children[1].content.startswith("from __future__ import annotations")
    assert "LOW_STOCK_THRESHOLD = 5" in children[1].content


def test_class_content_is_signature_docstring_and_attributes_without_methods() -> None:
    inventory = find(tree(), "Inventory")
    assert inventory.content.startswith('class Inventory:\n    """Stock levels per SKU')
    assert "movements_kept = 1000" in inventory.content
    assert "def " not in inventory.content
    assert [c.key for c in inventory.children] == [
        "Inventory.__init__",
        "Inventory.add",
        "Inventory.remove",
        "Inventory.low_stock",
    ]


def test_method_content_is_its_full_source_with_decorators() -> None:
    item = find(tree(), "Item")
    assert item.content.startswith("@dataclasses.dataclass\nclass Item:")
    is_free = find(tree(), "Item.is_free")
    assert is_free.kind == "function"
    assert (
        is_free.content
        == "    @property\n    def is_free(self) -> bool:\n        return self.price == 0"
    )


def test_whole_file_is_preserved_including_comments() -> None:
    parsed = tree()
    assert_text_preserved(SOURCE, parsed)
    assert_leaves_nonempty(parsed)
    assert "# Reports" in parsed.root.full_text()


def test_syntax_error_names_file_and_line() -> None:
    with pytest.raises(IngestError, match=r"broken\.py: Python syntax error at line 2"):
        parse_python("x = 1\ndef broken(:\n", "broken.py")


def test_class_lines_after_a_method_become_leaves_in_their_place() -> None:
    source = (
        "class Config:\n"
        '    """Settings."""\n'
        "    name = 'a'\n"
        "\n"
        "    def load(self):\n"
        "        return 1\n"
        "\n"
        "\n"
        "    # kept with the attribute below\n"
        "    retries = 3\n"
        "\n"
        "    def save(self):\n"
        "        return 2\n"
        "    timeout = 5\n"
    )
    klass = parse_python(source, "c.py").root.children[0]
    assert klass.content == "class Config:\n    \"\"\"Settings.\"\"\"\n    name = 'a'"
    assert [(c.kind, c.separator, c.content) for c in klass.children] == [
        ("function", "\n\n", "    def load(self):\n        return 1"),
        ("code", "\n\n\n", "    # kept with the attribute below\n    retries = 3"),
        ("function", "\n\n", "    def save(self):\n        return 2"),
        ("code", "\n", "    timeout = 5"),
    ]
    assert parse_python(source, "c.py").root.full_text() == source.rstrip("\n")


def test_nested_classes_are_class_nodes_with_their_own_methods() -> None:
    source = "class Outer:\n    class Inner:\n        def f(self):\n            pass\n    x = 1\n"
    outer = parse_python(source, "n.py").root.children[0]
    inner = outer.children[0]
    assert (inner.kind, inner.title, inner.content) == ("class", "Outer.Inner", "    class Inner:")
    assert [(c.kind, c.key) for c in inner.children] == [("function", "Outer.Inner.f")]
    assert outer.children[1].content == "    x = 1"
