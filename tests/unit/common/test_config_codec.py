"""Config as heronpy stores it (strings, pickled objects) and as Heron's instance reads it back."""

import json
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heron_py.common.config_codec import PICKLED, ConfigCodecError, restore_config, sanitize_config

keys = st.text(min_size=1, max_size=10)
primitive = st.one_of(st.booleans(), st.integers(), st.floats(allow_nan=False))
objects = st.one_of(st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                          max_size=3),
                    st.tuples(st.text(max_size=3)), st.none())


@given(st.dictionaries(keys, primitive))
def test_bools_and_numbers_come_back_typed(d):
    stored = sanitize_config(d, "here")
    assert all(isinstance(v, str) for v in stored.values())
    assert json.loads(json.dumps(stored)) == stored
    back = restore_config(stored)
    for k, v in d.items():
        assert back[k] == v and type(back[k]) is type(v)


@given(st.dictionaries(keys, objects))
def test_other_values_are_pickled_and_restored(d):
    stored = sanitize_config(d, "here")
    assert all(set(v) == {PICKLED} for v in stored.values())
    assert json.loads(json.dumps(stored)) == stored
    assert restore_config(stored) == d
    assert sanitize_config(stored, "again") == stored  # idempotent


def test_strings_read_back_as_heron_reads_them():
    stored = sanitize_config({"a": "12", "b": "1.5", "c": "True", "d": "false", "e": "word", "f": Fraction(1, 3)},
                             "here")
    assert stored["a"] == "12" and stored["c"] == "True"
    assert restore_config(stored) == {"a": 12, "b": 1.5, "c": True, "d": False, "e": "word", "f": Fraction(1, 3)}


def test_bad_keys_and_values_have_one_clear_message():
    with pytest.raises(TypeError) as e:
        sanitize_config({("a",): 1}, "config of topology 'wc'")
    assert str(e.value) == "config of topology 'wc': config keys must be str, found ('a',) (tuple)"
    with pytest.raises(ConfigCodecError) as e2:
        sanitize_config({"gen": (i for i in range(2))}, "config of bolt 'c'")
    assert str(e2.value) == ("config of bolt 'c': value of config key 'gen' cannot be serialized "
                             "(generator: cannot pickle 'generator' object)")


def test_only_the_spellings_str_gives_numbers_become_numbers():
    texts = [" 12", "1_000", "Infinity", "+3", ".5", "12a", "0x10"]
    assert restore_config(sanitize_config({t: t for t in texts}, "here")) == {t: t for t in texts}
    back = restore_config(sanitize_config({"n": float("nan"), "big": 10**30, "neg": -0.0}, "here"))
    assert back["n"] != back["n"] and back["big"] == 10**30 and str(back["neg"]) == "-0.0"
