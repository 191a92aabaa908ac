"""The RAM store: the longest shared prefix wins, a prompt replaces the entries it extends, the
bytes stay under the budget by dropping the least recently used."""

import torch

from pld_cli.runtime.prefix.store import Prefix, PrefixStore, as_tokens, common_length


def prefix(ids: list[int]) -> Prefix:
    kv = torch.zeros(2, 1, len(ids), 4)  # 32 bytes a position, keys and values: 64
    return Prefix(as_tokens(ids), kv, kv.clone())


def test_common_length():
    assert common_length(as_tokens([1, 2, 3]), as_tokens([1, 2, 4, 5])) == 2
    assert common_length(as_tokens([1, 2]), as_tokens([1, 2, 4])) == 2
    assert common_length(as_tokens([]), as_tokens([1])) == 0


def test_the_longest_shared_prefix_wins_and_a_prefix_of_an_entry_is_usable():
    store = PrefixStore(10_000)
    store.keep(prefix([1, 2, 3, 4]))
    store.keep(prefix([1, 2, 9]))
    assert store.match([1, 2, 3, 7])[0] == 3
    count, entry = store.match([1, 2, 9, 9])
    assert count == 3 and entry.tokens.tolist() == [1, 2, 9]
    assert store.match([1, 2])[0] == 2
    assert store.match([5]) == (0, None)


def test_a_prompt_replaces_what_it_extends_and_adds_nothing_where_it_is_held():
    store = PrefixStore(10_000)
    store.keep(prefix([1, 2]))
    store.keep(prefix([1, 2, 3]))
    assert len(store) == 1 and store.used == 3 * 64
    assert not store.wants([1, 2]) and store.wants([1, 2, 3, 4])
    store.keep(prefix([1, 2]))
    assert len(store) == 1 and store.used == 3 * 64


def test_the_least_recently_used_goes_first_and_no_entry_exceeds_the_budget():
    store = PrefixStore(5 * 64)
    store.keep(prefix([1, 1]))
    store.keep(prefix([2, 2]))
    store.match([1, 1])  # used: [2, 2] is now the oldest
    store.keep(prefix([3, 3]))
    assert sorted(e.tokens.tolist()[0] for e in store.entries.values()) == [1, 3]
    assert store.used == 4 * 64
    store.keep(prefix([4] * 6))  # larger than the whole budget: not kept
    assert store.used == 4 * 64 and len(store) == 2
