"""A DataTable updated by diff: changed cells are patched, new rows added, gone rows
removed. Rows are never cleared and rebuilt, so the cursor and scroll stay put and
nothing flickers. Sorting uses raw values kept beside the rendered cells.

A table of a fleet (hundreds of ranks, thousands of processes) shows the first rows of its
order only (:meth:`DiffTable.set_first`): rows are picked by their raw values and only
those shown are rendered, so a refresh costs the same for 8 ranks or 4,096; sorting by
another column picks again from all of them."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from rich.style import Style
from rich.text import Text
from textual.widgets import DataTable

from perftop.safe import visible_line


class Cell(Text):
    """Rendered text that remembers the raw value it shows, for sorting (None sorts last)."""

    def __init__(self, text: str, value: Any, style: str = "", justify: str = "right") -> None:
        # A cell's text may be a process's command line or a file name from the job.
        super().__init__(visible_line(text), style=style, justify=justify)  # type: ignore[arg-type]
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Text) and self.plain == other.plain and self.style == other.style


def _sort_key(value: Any, reverse: bool = False) -> tuple[int, Any]:
    """Numbers by value, text by text; N/A always last, whichever the direction."""
    v = value.value if isinstance(value, Cell) else value
    if v is None:
        return (-1 if reverse else 1, 0)
    return (0, v) if isinstance(v, (int, float)) else (0, str(v))


T = TypeVar("T")
FIRST_ROWS = 50  # what a fleet's table lists at most: more than a zoomed panel shows
RENDERED_CELLS = 4096  # rendered cells kept: every cell of a zoomed table, in two styles


class First(Generic[T]):
    """What :meth:`DiffTable.set_first` shows: ``items`` by row key, their raw values in
    column order (what the cells show, for picking), their cells, and how many at most."""

    __slots__ = ("cells", "items", "limit", "pinned", "values")

    def __init__(
        self,
        items: Mapping[str, T],
        values: Callable[[T], Sequence[Any]],
        cells: Callable[[str, T], Sequence[Cell]],
        limit: int,
        pinned: Sequence[str] = (),
    ) -> None:
        self.items, self.values, self.cells = items, values, cells
        self.limit, self.pinned = limit, pinned

    def pick(self, column: int, reverse: bool) -> list[str]:
        """The row keys the table shows: the first ``limit`` in its order (N/A last,
        ties in ``items`` order), then the ``pinned`` ones not among them."""
        if len(self.items) <= self.limit:
            return list(self.items)
        values = self.values
        first = heapq.nlargest if reverse else heapq.nsmallest
        keys = [
            k
            for k, _ in first(
                self.limit,
                self.items.items(),
                key=lambda kv: _sort_key(values(kv[1])[column], reverse),
            )
        ]
        return keys + [k for k in self.pinned if k in self.items and k not in keys]


class DiffTable(DataTable):
    DEFAULT_CSS = "DiffTable { height: 1fr; }"

    def __init__(self, columns: Sequence[tuple[str, str]], *, sort: str, reverse: bool) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False)
        self._columns = list(columns)  # (key, label)
        self.sort_column = sort
        self.sort_reverse = reverse
        self._default_sort = (sort, reverse)
        self._first: First[Any] | None = None
        self.left_out = 0  # rows of the last set_first not shown
        self._rendered: dict[tuple[Any, ...], Any] = {}  # see _render_cell

    def on_mount(self) -> None:
        self._add_columns()

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> Any:
        """Textual's own, cached by what the cell shows and how. Textual keys its cache
        by the table's update count, so one changed cell has every visible cell rendered
        again (at each refresh, and at each zoom or focus after it); here an unchanged
        cell at the same place in the same style costs a lookup."""
        args = (row_index, column_index, base_style, width, cursor, hover)
        if row_index < 0 or column_index < 0:  # the header, a row label
            return super()._render_cell(*args)
        try:
            row_key: Any = self._row_locations.get_key(row_index)
            cell = self.get_cell(row_key, self._column_locations.get_key(column_index))  # type: ignore[arg-type]
            key = (
                *args,
                cell.plain,
                cell.style,
                tuple(cell.spans),
                cell.justify,
                self.rows[row_key].height,
                self.show_cursor,
                self._show_hover_cursor,
                self._pseudo_class_state,
                self.cell_padding,
            )
        except Exception:  # a Textual without these
            return super()._render_cell(*args)
        lines = self._rendered.get(key)
        if lines is None:
            if len(self._rendered) >= RENDERED_CELLS:
                self._rendered.clear()
            lines = self._rendered[key] = super()._render_cell(*args)
        return lines

    def _add_columns(self) -> None:
        for key, label in self._columns:
            self.add_column(label, key=key)
        self._mark_sort()

    def label_widths(self) -> list[int]:
        """Each shown column's label width, in order (a sort arrow included)."""
        shown = {c.key.value: c.label.cell_len for c in self.columns.values()}
        return [shown.get(k, len(label)) for k, label in self._columns]

    def set_columns(self, columns: Sequence[tuple[str, str]]) -> None:
        """Show another set of columns (a column that a run cannot fill is hidden): the
        table is rebuilt once; the sort falls back to the default if its column went away."""
        if list(columns) == self._columns:
            return
        self._columns = list(columns)
        if self.sort_column not in [k for k, _ in self._columns]:
            self.sort_column, self.sort_reverse = self._default_sort
        self.clear(columns=True)
        self._add_columns()

    def set_rows(self, rows: Mapping[str, Sequence[Cell]]) -> None:
        """Make the table show exactly ``rows`` (row key -> cells in column order).

        Where rows only changed figures, in the same order and column widths, only those
        rows are drawn again: Textual's ``update_cell`` and ``sort`` have the whole table
        drawn (its header and every visible row and blank line) for any one cell."""
        keys = [k for k, _ in self._columns]
        changed = False
        patched: set[str] = set()  # columns with a cell rewritten
        rewritten: set[str] = set()  # rows with a cell rewritten
        for row_key in [k.value for k in self.rows if k.value is not None and k.value not in rows]:
            self.remove_row(row_key)
            changed = True
        order = None if changed else self._order()
        self._holding = order is not None  # see refresh: drawn below
        try:
            for row_key, cells in rows.items():
                if row_key not in self.rows:
                    self.add_row(*cells, key=row_key)  # the table measures new rows itself
                    changed = True
                    continue
                for col, cell in zip(keys, cells):
                    if self.get_cell(row_key, col) != cell:
                        self.update_cell(row_key, col, cell)
                        patched.add(col)
                        rewritten.add(row_key)
            widened = self._fit(patched, rows) if patched else False
            if changed or patched:
                self._apply_sort()
        finally:
            self._holding = False
        if order is None or changed or widened or self._order() != order:
            if self._held:
                self.refresh()
        else:
            for row_key in rewritten:
                self.refresh_row(self.get_row_index(row_key))
        self._held = False

    _holding = False  # set_rows is patching: a whole-table refresh is held back
    _held = False  # ... and one was asked for

    def refresh(self, *regions: Any, **kwargs: Any) -> DiffTable:
        if self._holding and not regions and not kwargs:
            self._held = True
            return self
        super().refresh(*regions, **kwargs)
        return self

    def _order(self) -> list[Any]:
        """The row keys in the order shown."""
        return [r.key for r in self.ordered_rows]

    def set_first(self, first: First[Any]) -> None:
        """Show the first ``first.limit`` rows in the table's order (and the pinned ones):
        only those are rendered. Sorting by another column picks again."""
        self._first = first
        self._pick()

    def _pick(self) -> None:
        first = self._first
        if first is None:
            return
        column = [k for k, _ in self._columns].index(self.sort_column)
        keys = first.pick(column, self.sort_reverse)
        self.left_out = len(first.items) - len(keys)
        self.set_rows({k: first.cells(k, first.items[k]) for k in keys})

    def _fit(self, columns: set[str], rows: Mapping[str, Sequence[Cell]]) -> bool:
        """Size each patched column to its widest cell, one pass over the column (the
        table's own ``update_width`` measures the whole column again for every cell that
        got narrower: with hundreds of rows changing at each refresh, that is quadratic);
        whether a width changed."""
        widened = False
        for i, (key, _) in enumerate(self._columns):
            col = self.columns.get(key)  # type: ignore[call-overload]
            if key not in columns or col is None:
                continue
            row_key, widest = max(
                ((k, cells[i]) for k, cells in rows.items()), key=lambda kc: kc[1].cell_len
            )
            if col.content_width != max(widest.cell_len, col.label.cell_len):
                # The table measures one cell as wide as its current width: it takes the
                # width (or the label's, if wider) and lays itself out again.
                col.content_width = widest.cell_len
                self.update_cell(row_key, key, widest, update_width=True)
                widened = True
        return widened

    def _apply_sort(self) -> None:
        rev = self.sort_reverse
        self.sort(self.sort_column, key=lambda v: _sort_key(v, rev), reverse=rev)

    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        if reverse is None:
            reverse = not self.sort_reverse if column == self.sort_column else True
        self.sort_column, self.sort_reverse = column, reverse
        self._mark_sort()
        self._pick()  # a table of the first rows: the first of the new order
        self._apply_sort()

    def next_sort(self) -> None:
        keys = [k for k, _ in self._columns]
        i = (keys.index(self.sort_column) + 1) % len(keys)
        self.sort_by(keys[i], reverse=self.sort_reverse)

    def invert_sort(self) -> None:
        self.sort_by(self.sort_column, not self.sort_reverse)

    def _mark_sort(self) -> None:
        """Show the sort column and direction in its header label."""
        for key, label in self._columns:
            col = self.columns.get(key)  # type: ignore[call-overload]
            if col is None:
                continue
            arrow = ("▼" if self.sort_reverse else "▲") if key == self.sort_column else ""
            col.label = Text(label + arrow, style="bold" if arrow else "")
            if arrow and col.content_width < col.label.cell_len:
                # A column whose figures are narrower than its label and arrow (CPU%,
                # read/s) grows to show the arrow: the table measures a label only when
                # a cell of its column changes, so one is rewritten as it is.
                col.content_width = col.label.cell_len
                if self.row_count:
                    row = next(iter(self.rows))
                    self.update_cell(row, key, self.get_cell(row, key), update_width=True)
        self.refresh()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(str(event.column_key.value))
