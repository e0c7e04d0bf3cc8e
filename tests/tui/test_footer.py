"""The console's footer against Textual's own compact Footer, in an app of their own: the same keys drawn the same
in every state, and a rebuild only where the keys shown change (Textual's rebuilds at every move of the focus)."""
from __future__ import annotations

from textual.app import App
from textual.binding import Binding
from textual.widgets import Footer, Input, Static
from textual.widgets._footer import FooterKey

from perfconsole.tui.widgets.footer import ConsoleFooter


class Sortable(Static, can_focus=True):
    BINDINGS = [Binding("s", "sort", "Sort"), Binding("f", "find", "Filter")]

    def action_sort(self) -> None:
        self.app.sorted = True  # type: ignore[attr-defined]


class Keys(App):
    BINDINGS = [Binding("question_mark", "help", "Keys"), Binding("q", "quit", "Quit"),
                Binding("x", "hidden", "Hidden", show=False)]

    def __init__(self, footer: Footer) -> None:
        super().__init__()
        self.footer, self.sorted, self.rebuilds = footer, False, 0

    def compose(self):
        yield Input(id="one")
        yield Input(id="two")
        yield Sortable("table", id="table")
        yield self.footer


def counting(cls):
    class Counting(cls):
        async def recompose(self) -> None:
            self.app.rebuilds += 1
            await super().recompose()
    return Counting


async def _walk(footer: Footer) -> list[tuple[str, list[tuple[str, str, bool]], int, str]]:
    """Focus each widget in turn and back, and what the footer shows at each step: its keys and the drawn line."""
    app = Keys(footer)
    seen = []
    # Tall enough for the two fields and the table: in 6 rows the screen scrolled as the table took the focus, and
    # its scrollbar, drawn over the last two columns of the footer's row or not yet, made the line differ by timing.
    async with app.run_test(size=(60, 12)) as pilot:
        for target in ("#one", "#two", "#one", "#table", "#two", "#table"):
            app.query_one(target).focus()
            for _ in range(4):  # the rebuild comes after a refresh, and its first frame may still be drawing
                await pilot.pause()
            keys = [(k.key, k.description, k.has_class("-compact")) for k in app.query(FooterKey)]
            line = "".join(s.text for s in app.screen._compositor.render_strips()[-1:])
            seen.append((target, keys, app.rebuilds, line))
        await pilot.press("s")
        assert app.sorted  # a key the footer shows still acts
    return seen


async def test_the_footer_shows_what_textuals_compact_footer_shows_and_rebuilds_only_on_change():
    ours = await _walk(counting(ConsoleFooter)())
    theirs = await _walk(counting(Footer)(compact=True))
    assert [(t, k, line) for t, k, _, line in ours] == [(t, k, line) for t, k, _, line in theirs]
    shown = {t: [d for _, d, _ in k] for t, k, _, _ in ours}
    # a field takes the printable keys, so the app's ? and q are not offered there
    assert shown["#one"] == ["palette"] and shown["#table"] == ["Sort", "Filter", "Keys", "Quit", "palette"]
    assert all(compact for _, k, _, _ in ours for *_, compact in k)
    # Textual's rebuilt at each of the six moves; ours where the shown keys changed: into the table, out, in again
    ours_rebuilds = [n for *_, n, _ in ours]
    theirs_rebuilds = [n for *_, n, _ in theirs]
    assert theirs_rebuilds[-1] - theirs_rebuilds[0] >= 5, theirs_rebuilds
    assert [b - a for a, b in zip(ours_rebuilds, ours_rebuilds[1:])] == [0, 0, 1, 1, 1], ours_rebuilds
