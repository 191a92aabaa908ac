import pytest

from pld_cli.errors import PldError
from pld_cli.tasks.kinds import kind_of, registry


def test_every_kind_module_registers_itself_under_its_name():
    assert set(registry()) == {"edit", "summarize"}
    assert kind_of("edit").needs_instruction and not kind_of("summarize").needs_instruction


def test_an_unknown_kind_is_refused_by_name():
    with pytest.raises(PldError, match='unknown task "translate"'):
        kind_of("translate")
