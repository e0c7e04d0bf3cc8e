"""The Textual console: screens and widgets that draw what perfconsole.core computed."""
