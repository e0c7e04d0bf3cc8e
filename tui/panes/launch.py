"""The launch form: every RunSpec field a user picks, checked as they type, with the run key disabled
until the whole form is valid. Errors show beside the field with the allowed values (SpecError's text).

The model comes first (builtin, hf:ARCH, PATH.py:FACTORY) with its KEY=VALUE arguments; the size selector
offers that model's own sizes and keeps the size last chosen where the new model has it. A factory sets its
own shape, so it has no size row."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, Label, Static

from perfconsole.core.launch import model_choice
from perfconsole.core.settings.declarations import Setting, declared, kind_for
from perfconsole.core.settings.kinds import Choice, Flag, Integer, Kind, Number, Pairs, Text
from perfconsole.core.settings import RunSpec, SpecError
from perfconsole.core.settings.rules import why_not
from perfconsole.tui.widgets.choice_field import ChoiceField
from perfconsole.tui.widgets.form_checkbox import FormCheckbox
from perfconsole.tui.widgets.form_input import FormInput

# The form's rows come from the settings' declarations (core.settings): each row's label and order, and its
# widget from the kind of its values (WIDGETS); the size's choices are the model's own (model_choice.sizes),
# and a custom size's dimensions show only for size custom.
ROWS = sorted(((f, s) for f, s in declared(RunSpec) if s.form is not None), key=lambda fs: fs[1].row)
ORDER = tuple(f.name for f, _ in ROWS)
LABELS = {f.name: s.form for f, s in ROWS}
SETTINGS = {f.name: s for f, s in ROWS}
KINDS: dict[str, Kind] = {f.name: kind_for(f) for f, _ in declared(RunSpec)}
CHOICES: dict[str, tuple[str, ...]] = {name: k.choices for name in ORDER if isinstance(k := KINDS[name], Choice)}
DIMS = tuple(f.name for f, s in ROWS if s.custom_only)


def _field(kind: Kind, s: Setting, value: Any, wid: str) -> Widget:
    return FormInput(kind.show(value), compact=True, id=wid)


def _pairs(kind: Kind, s: Setting, value: Any, wid: str) -> Widget:
    return FormInput(kind.show(value), compact=True, id=wid, placeholder=f"{s.metavar},...")


def _box(kind: Kind, s: Setting, value: Any, wid: str) -> Widget:
    return FormCheckbox("", value=bool(value), compact=True, id=wid)


def _selector(kind: Choice, s: Setting, value: Any, wid: str) -> Widget:
    return ChoiceField(kind.choices, value, id=wid)


# Each kind of value's widget: (kind, setting, value, id) -> the row's widget.
WIDGETS: dict[type[Kind], Callable[..., Widget]] = {
    Flag: _box, Choice: _selector, Integer: _field, Number: _field, Text: _field, Pairs: _pairs}


def widget_for(name: str, value: Any) -> Widget:
    """A row's widget for `value`, by the kind of its setting's values."""
    kind = KINDS[name]
    return WIDGETS[type(kind)](kind, SETTINGS[name], value, f"f-{name}")


def form_changes(values: dict[str, Any], base: RunSpec) -> tuple[dict[str, Any], dict[str, str]]:
    """({field: value} for each field whose text its kind reads, {field: message} for each it refuses, in the
    words the command line's flag says them). A custom size's dimensions are None unless they show: size
    custom, a model that is not a factory."""
    errors: dict[str, str] = {}
    changes: dict[str, Any] = {}
    model = str(values.get("model", base.model)).strip()
    factory = model_choice.sizes(model) == ()
    for name, raw in values.items():
        kind = KINDS.get(name)
        if name in DIMS and (values.get("size") != "custom" or factory):
            changes[name] = None
        elif kind is None:
            changes[name] = raw
        else:
            try:
                changes[name] = kind.parse(raw if isinstance(raw, str) else kind.show(raw))
            except ValueError as exc:
                errors[name] = str(exc)
    return changes, errors


def spec_from_form(values: dict[str, Any], base: RunSpec) -> tuple[RunSpec | None, dict[str, str]]:
    """(spec, {}) when valid, else (None, {field: message}) with every field that is wrong on its own,
    plus the first cross-field error RunSpec.validate finds."""
    changes, errors = form_changes(values, base)
    model = changes.get("model", base.model)
    try:  # what the files tell of the model, before any process: beside the field, with the others
        model_choice.check(model, changes.get("model_args", base.model_args))
    except SpecError as exc:
        errors[exc.field] = str(exc).split(": ", 1)[1]
    if errors:
        return None, errors
    known = {f.name for f in fields(RunSpec)}
    spec = base.with_(**{k: v for k, v in changes.items() if k in known})
    try:
        return spec.validate(), {}
    except SpecError as exc:
        return None, {exc.field: str(exc).split(": ", 1)[1]}


def pick_size(options: tuple[str, ...], wanted: str, current: str, device: str) -> str:
    """The size to show when the model's sizes change: the one last chosen, else the one shown, else the
    CLI's default (tiny on the CPU, the smallest published size on a GPU), else the first."""
    published = [s for s in options if s not in ("tiny", "default", "custom")]
    for size in (wanted, current, "tiny" if device == "cpu" else (published[:1] or [""])[0]):
        if size in options:
            return size
    return options[0]


class LaunchRequested(Message):
    """`interleave`: the specs are compared, their processes run in rounds (A1 B1 A2 B2 ...)."""

    def __init__(self, specs: list[RunSpec], queue: bool, interleave: bool = False) -> None:
        super().__init__()
        self.specs, self.queue, self.interleave = specs, queue, interleave


class LaunchPane(VerticalScroll):
    BINDINGS = [
        Binding("ctrl+r", "launch", "Run", id="launch.run"),
        Binding("ctrl+e", "enqueue", "Queue", id="launch.queue"),
        Binding("ctrl+t", "enqueue_ladder", "Queue fp32/bf16/fp16", id="launch.ladder"),
    ]

    def __init__(self, prefill: RunSpec, **kw) -> None:
        super().__init__(**kw)
        self.base = prefill
        self.spec: RunSpec | None = None
        self.errors: dict[str, str] = {}
        self.size_choice = prefill.size  # the size last chosen, kept through models that lack it
        self.size_options: tuple[str, ...] = ()  # what the size selector offers now
        self.offered = dict(CHOICES)  # what each other selector offers now (its setting's needs allowing)

    def compose(self) -> ComposeResult:
        p = self.base
        with Grid(id="form"):
            for name in ORDER:
                yield Label(LABELS[name], id=f"lbl-{name}", classes=f"lbl {'dim-row' if name in DIMS else ''}")
                value = getattr(p, name)
                if name == "size":  # a selector of the model's own sizes
                    opts = self.size_options = model_choice.sizes(p.model) or (p.size,)  # a factory: the kept size
                    yield ChoiceField(opts, value, id="f-size")
                else:
                    yield widget_for(name, value)
                yield Static("", id=f"err-{name}", classes="err")
        with Horizontal(id="launch-buttons"):
            yield Button("Run  ^r", id="btn-run", variant="primary", compact=True)
            yield Button("Queue  ^e", id="btn-queue", compact=True)
            yield Button("Queue fp32/bf16/fp16  ^t", id="btn-ladder", compact=True)
        yield Static("", id="queue-info")

    def on_mount(self) -> None:
        self.revalidate()

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in ORDER:
            w = self.query_one(f"#f-{name}")
            out[name] = w.value
        return out

    def set_value(self, name: str, value: Any) -> None:
        """Set one field (tests and the command line use it); validation follows. A new model offers its
        sizes at once, so a size set next is one of them. Code may set any declared choice, one the form does
        not offer too: validation then says beside it what is wrong."""
        w = self.query_one(f"#f-{name}")
        if name in CHOICES and value not in self.offered[name]:
            self.offered[name] = CHOICES[name]
            with self.prevent(ChoiceField.Changed):
                w.set_options(CHOICES[name])
        w.value = str(value) if isinstance(w, Input) else value
        if name in ("model", "device"):
            values = self.values()
            self._offer_sizes(str(values["model"]), str(values["device"]))

    @on(Input.Changed)
    @on(ChoiceField.Changed)
    @on(Checkbox.Changed)
    def _changed(self, event: Input.Changed | ChoiceField.Changed | Checkbox.Changed) -> None:
        if isinstance(event, ChoiceField.Changed) and event.control.id == "f-size":
            self.size_choice = str(event.value)  # a person's (or set_value's) choice: the form's own are silent
        self.revalidate()

    def _offer_sizes(self, model: str, device: str) -> bool:
        """Give the size selector the model's sizes; True for a factory (no size row). Silent: the change
        is the form's, not a choice to remember."""
        select = self.query_one("#f-size", ChoiceField)
        opts = model_choice.sizes(model.strip())
        if not opts:  # a factory keeps whatever size it has (unused); an unfinished model keeps the list
            return opts == ()
        if self.size_options != opts:
            self.size_options = opts
            with self.prevent(ChoiceField.Changed):
                current = select.value
                select.set_options(opts)
                select.value = pick_size(opts, self.size_choice, str(current), device)
        return False

    def _offer_choices(self, values: dict[str, Any]) -> None:
        """Each selector offers the choices the rules between settings allow beside the rest of the form
        (core.settings.rules.why_not: no nsys on the CPU, no DDP hook without DDP), and a box whose other state they
        refuse keeps its state and says why when toggled; the value shown stays, so a choice the form no longer
        allows says why beside it rather than vanishing. Silent, as the sizes are."""
        changes, _ = form_changes(values, self.base)
        known = {f.name for f in fields(RunSpec)}
        probe = self.base.with_(**{k: v for k, v in changes.items() if k in known})
        for name, choices in CHOICES.items():
            select = self.query_one(f"#f-{name}", ChoiceField)
            offered = tuple(c for c in choices if c == select.value or why_not(probe, **{name: c}) is None)
            if self.offered[name] != offered:
                self.offered[name] = offered
                with self.prevent(ChoiceField.Changed):
                    select.set_options(offered)  # the value shown is among them
        for name in (n for n in ORDER if isinstance(KINDS[n], Flag)):
            box = self.query_one(f"#f-{name}", FormCheckbox)
            why = why_not(probe, **{name: not box.value})
            box.refused = f"{name}: {why}" if why else None  # validation's words, had the box been toggled

    def revalidate(self) -> None:
        values = self.values()
        self._offer_choices(values)
        factory = self._offer_sizes(str(values["model"]), str(values["device"]))
        values["size"] = self.query_one("#f-size", ChoiceField).value
        for wid in ("#f-size", "#lbl-size", "#err-size"):
            self.query_one(wid).display = not factory
        custom = values["size"] == "custom" and not factory
        for name in DIMS:
            for wid in (f"#f-{name}", f"#lbl-{name}", f"#err-{name}"):
                self.query_one(wid).display = custom
        self.spec, self.errors = spec_from_form(values, self.base)
        for name in ORDER:
            msg = self.errors.get(name, "")
            self.query_one(f"#err-{name}", Static).update(msg)
            self.query_one(f"#f-{name}").set_class(bool(msg), "-invalid")
        for bid in ("#btn-run", "#btn-queue", "#btn-ladder"):
            self.query_one(bid, Button).disabled = self.spec is None
        unknown = [f for f in self.errors if f not in ORDER]
        self.query_one("#queue-info", Static).update(
            "; ".join(f"{f}: {self.errors[f]}" for f in unknown))

    def set_queue_info(self, text: str) -> None:
        if not any(f not in ORDER for f in self.errors):
            self.query_one("#queue-info", Static).update(text)

    @on(Button.Pressed, "#btn-run")
    def action_launch(self) -> None:
        if self.spec is not None:
            self.post_message(LaunchRequested([self.spec], queue=False))

    @on(Button.Pressed, "#btn-queue")
    def action_enqueue(self) -> None:
        if self.spec is not None:
            self.post_message(LaunchRequested([self.spec], queue=True))

    @on(Button.Pressed, "#btn-ladder")
    def action_enqueue_ladder(self) -> None:
        if self.spec is None:
            return
        from perfconsole.core.launch.queue import precision_ladder

        try:
            specs = precision_ladder(self.spec)
        except SpecError as exc:
            self.notify(str(exc), severity="error")
            return
        # With several processes each, the three precisions run in rounds, so drift hits all three.
        self.post_message(LaunchRequested(specs, queue=True, interleave=self.spec.repeat > 1))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("launch", "enqueue", "enqueue_ladder") and self.spec is None:
            return None  # shown greyed out in the footer
        return True
