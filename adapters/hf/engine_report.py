# What each forward of a transformers model received and what its cache held, as the model and its cache object
# report them (kvconf.trace/1.2's calls, cache_after and calls_reported_by; docs/TRACES.md "The engine's report").
"""A probe on a transformers causal LM: every forward call recorded from the model's own arguments and cache object.

The adapter's own variables never enter the record: a forward pre-hook (with keyword arguments) reads, as the model
receives them, input_ids (or inputs_embeds), the attention mask and the cache object with its own get_seq_length();
a forward hook reads the cache the model returns and its length after the call. For batch entry `row` (0: the traced
request) each call becomes

* fed     -- the tokens of this sequence the call fed: the mask's ones among the call's new columns (all of them
             without a mask);
* cached  -- this sequence's rows the cache held before the call: the mask's ones among the cache's columns (the
             cache's own length without a mask; 0 with no cache);
* batch   -- the tokens of every sequence the call fed: the mask's ones among the new columns of all B rows
             (B x S without a mask);
* after   -- this sequence's rows the returned cache holds (its own length less this row's padding; 0: no cache).

An adapter that recomputes on its cache-ON side records [n + t, 0] at step t whatever its bookkeeping says; one
whose "batched" side ran alone records batch == fed.

    with ForwardProbe(model) as probe:
        out = model(input_ids=..., past_key_values=cache, use_cache=True)
        with probe.paused():          # another request's forward (the prefix scenario's donor): not this run's
            model(...)
    probe.calls, probe.cache_after, probe.reported_by
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator


def _cache_length(cache: Any) -> int:
    """The rows a transformers cache object says it holds (0 for no cache)."""
    return 0 if cache is None else int(cache.get_seq_length())


class ForwardProbe:
    """Records every forward of `model` (a transformers PreTrainedModel) while active, for batch entry `row`."""

    def __init__(self, model: Any, row: int = 0) -> None:
        self.model, self.row = model, row
        self.calls: list[list[int]] = []  # [fed, cached] alone, [fed, cached, batch] when batch != fed
        self.cache_after: list[int] = []
        self._handles: list[Any] = []
        self._pending: list[tuple[int, int, int, int]] = []  # (fed, cached, batch, this row's padding columns)
        self._paused = False
        self.reported_by = (f"transformers forward pre-hook and hook on {type(model).__name__}: input_ids.shape, "
                            f"attention_mask, past_key_values.get_seq_length() before and after each call")

    def __enter__(self) -> "ForwardProbe":
        self._handles = [self.model.register_forward_pre_hook(self._before, with_kwargs=True),
                         self.model.register_forward_hook(self._after, with_kwargs=True)]
        return self

    def __exit__(self, *exc: object) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Forwards inside are not this run's calls (another request's)."""
        self._paused = True
        try:
            yield
        finally:
            self._paused = False

    def _before(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self._paused:
            return
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            ids = kwargs.get("inputs_embeds")
        if ids is None:
            raise RuntimeError("ForwardProbe: a forward with neither input_ids nor inputs_embeds")
        batch, new = int(ids.shape[0]), int(ids.shape[1])
        cache = kwargs.get("past_key_values")
        columns = _cache_length(cache)
        mask = kwargs.get("attention_mask")
        if mask is None:
            fed, cached, pads, rows = new, columns, 0, batch * new
        else:
            m = mask[self.row]  # (columns + new): 1 for this sequence's tokens, 0 for padding
            if int(m.shape[0]) != columns + new:
                raise RuntimeError(f"ForwardProbe: an attention mask of {int(m.shape[0])} columns over a cache of "
                                   f"{columns} rows and {new} new tokens")
            fed, cached = int(m[columns:].sum()), int(m[:columns].sum())
            pads = int((m == 0).sum())
            rows = int(mask[:, columns:].sum())
        self._pending.append((fed, cached, rows, pads))

    def _after(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        if self._paused:
            return
        fed, cached, batch, pads = self._pending.pop()
        cache = getattr(output, "past_key_values", None)
        held = _cache_length(cache)
        self.calls.append([fed, cached] if batch == fed else [fed, cached, batch])
        self.cache_after.append(max(0, held - pads) if cache is not None else 0)
