"""Modal dialogs: confirm, the list of every key, open a snapshot, export to a file."""
from __future__ import annotations

import contextlib
from pathlib import Path

from rich.table import Table
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual import events
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from perfconsole.core import store
from perfconsole.tui.widgets.form_input import FormInput


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [Binding("y", "answer(True)", "Yes", id="confirm.yes"),
                Binding("n,escape", "answer(False)", "No", id="confirm.no")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question)
            yield Static("y: yes   n / Esc: no", classes="hint")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


KEY_NAMES = {"escape": "Esc", "home": "Home", "end": "End", "pageup": "PgUp", "pagedown": "PgDn", "enter": "Enter",
             "tab": "Tab", "shift+tab": "shift+Tab", "question_mark": "?", "slash": "/", "f1": "F1", "f2": "F2", "f3": "F3", "f4": "F4"}


def key_text(keys: str) -> str:
    """"n,escape" as "n, Esc": the keys as the docs and the dialogs' hints name them."""
    return ", ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in keys.split(","))


def more_sections() -> list[tuple[str, list[tuple[str, str]]]]:
    """The keys of text fields, tables and dialogs, which no pane's bindings list: read from their bindings."""
    from perfconsole.tui.widgets.console_table import ConsoleTable

    def keys(bindings: list, only: tuple[str, ...] = ()) -> list[tuple[str, str]]:
        return [(b.key, b.description) for b in bindings if isinstance(b, Binding) and (not only or b.key in only)]
    return [("Text fields", keys(FormInput.BINDINGS, ("escape",))),
            ("Every table", keys(ConsoleTable.BINDINGS)),
            ("Scrolling Grids", [("arrows", "Scroll"), ("pageup,pagedown", "Page up, down"), ("home,end", "Top, bottom")]),
            ("Open dialog", [("enter", "Open"), ("down, tab", "To the list"), *keys(OpenScreen.BINDINGS)]),
            ("Export dialog", [*keys(ExportScreen.BINDINGS[1:]), ("enter", "Write the file"),
                               *keys(ExportScreen.BINDINGS[:1])]),
            ("Questions (y/n)", keys(ConfirmScreen.BINDINGS))]


class HelpScreen(ModalScreen[None]):
    """Every key of every pane, read from the bindings themselves so the list never goes stale."""
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close", id="help.close")]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = [*sections, *more_sections()]

    def compose(self) -> ComposeResult:
        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold cyan", no_wrap=True)
        t.add_column()
        for title, keys in self.sections:
            t.add_row(f"[u]{title}[/u]", "")
            for key, desc in keys:
                t.add_row(key_text(key), desc)
        with VerticalScroll(classes="dialog wide"):
            # The way out and the way around first: the list below is longer than an 80x24 screen.
            yield Static("Esc, q or ? closes this list (arrows and PgUp/PgDn scroll it). Tab and shift+Tab move "
                         "between fields, tables and buttons; Enter presses a button, opens the run under the "
                         "cursor, or leaves a text field; Esc also leaves a text field. ctrl+p opens the command "
                         "palette.", classes="hint")
            yield Static(t)

    def action_close(self) -> None:
        self.dismiss(None)


class TypeAhead:
    """A dialog whose path field takes the keys typed before it has the focus.

    The field is focused once the dialog is mounted; keys typed in a burst right after the key that opened
    the dialog reach the dialog before that, and were lost (an Enter among them then submitted an empty
    path). Here they go to the field in typing order: characters, Backspace and Enter."""
    field_id = ""

    async def on_key(self, event: events.Key) -> None:
        field = self.query_one(f"#{self.field_id}", Input)  # type: ignore[attr-defined]
        if self.focused not in (None, field):  # type: ignore[attr-defined]
            return  # another widget of the dialog has the keys
        if event.is_printable and event.character:
            field.insert_text_at_cursor(event.character)
        elif event.key == "backspace":
            field.action_delete_left()
        elif event.key == "enter":
            await field.action_submit()
        else:
            return
        event.stop()
        event.prevent_default()


class OpenScreen(TypeAhead, ModalScreen[Path | None]):
    """Type a path, or pick a snapshot from the data directory or the shipped examples.

    The path field has the focus first, so whatever is typed lands in it (with the list focused, typed
    letters went nowhere and Enter opened the list's first entry); Down or Tab moves to the list.
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="open.cancel")]
    field_id = "open-path"

    def __init__(self, title: str, choices: list[Path], placeholder: str = "path to a snapshot .json") -> None:
        super().__init__()
        self.title_text = title
        self.choices = choices
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label(self.title_text)
            with Horizontal(id="open-path-row"):
                yield Label("path ", classes="field-label")
                yield PathInput(placeholder=self.placeholder, id="open-path", compact=True)
            if self.choices:
                yield Label("or pick one:", classes="hint")
            yield OptionList(*(Option(str(p), id=str(i)) for i, p in enumerate(self.choices)), id="open-list")
            yield Static("Enter opens; Down or Tab moves to the list, shift+Tab back; Esc cancels", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#open-list").display = bool(self.choices)
        self.query_one("#open-path").focus()

    @on(Input.Submitted, "#open-path")
    def _typed(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(Path(event.value.strip()).expanduser())
        elif self.choices:
            self.query_one("#open-list").focus()

    @on(OptionList.OptionSelected, "#open-list")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.choices[int(event.option.id or 0)])

    def action_cancel(self) -> None:
        self.dismiss(None)


class PathInput(FormInput):
    """A dialog's path field: Down goes to the list below it (at once, like the other editing keys), and
    Esc cancels the dialog rather than leaving the field."""

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "down":
            event.stop()
            event.prevent_default()
            self.screen.focus_next()
            return
        await super()._on_key(event)

    def action_leave(self) -> None:
        self.screen.dismiss(None)


class ExportScreen(TypeAhead, ModalScreen[tuple[str, Path] | None]):
    """Choose md / csv / json / svg (keys F1 to F4; svg: a profiled run's timeline) and the file; the path follows
    the format. Dismissed with
    a path that may be written: its folder is there, and it is new or the user said to overwrite it."""
    field_id = "export-path"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="export.cancel"),
                Binding("f1", "fmt('md')", "Markdown", id="export.md"),
                Binding("f2", "fmt('csv')", "CSV", id="export.csv"),
                Binding("f3", "fmt('json')", "JSON", id="export.json"),
                Binding("f4", "fmt('svg')", "SVG timeline", id="export.svg")]

    def __init__(self, what: str, stem: Path, fmt: str = "md") -> None:
        super().__init__()
        self.what, self.stem, self.fmt = what, stem, fmt

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label(f"Export {self.what}")
            yield Static("", id="export-fmt")
            yield PathInput(str(self.stem.with_suffix("." + self.fmt)), id="export-path", compact=True)
            yield Static("F1 Markdown  F2 CSV  F3 JSON  F4 SVG (a profiled run's timeline); Enter writes the file; "
                         "Esc cancels", classes="hint")

    def on_mount(self) -> None:
        self._show_fmt()
        self.query_one("#export-path").focus()

    def _show_fmt(self) -> None:
        self.query_one("#export-fmt", Static).update(f"format: {self.fmt}")

    def action_fmt(self, fmt: str) -> None:
        self.fmt = fmt
        path = self.query_one("#export-path", Input)
        path.value = str(Path(path.value).with_suffix("." + fmt))
        self._show_fmt()

    @on(Input.Submitted, "#export-path")
    def _write(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.check(Path(event.value.strip()).expanduser())

    def check(self, path: Path) -> None:
        """The CLI's rule for output files (core.store.writable_file): a missing folder is an error naming
        it, and the dialog stays open with the path to correct; an existing file is replaced only on y, and
        n comes back here. Only the default's folder, the data directory's exports, is made on first use."""
        if path.parent == self.stem.parent:
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
        try:
            store.writable_file(path)
        except store.FileExists:
            def answer(yes: bool | None) -> None:
                if yes:
                    self.dismiss((self.fmt, path))

            self.app.push_screen(ConfirmScreen(f"{path} exists. Overwrite it? (y/n)"), answer)
            return
        except store.SnapshotError as exc:
            self.notify(str(exc), severity="error", timeout=8)
            return
        self.dismiss((self.fmt, path))

    def action_cancel(self) -> None:
        self.dismiss(None)
