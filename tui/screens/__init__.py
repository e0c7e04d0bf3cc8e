"""The console's screens: the main screen (console_screen), and the ones shown over it: the dialogs and the
kernel detail (kernel_why). The panes inside the main screen's tabs are tui.panes."""
