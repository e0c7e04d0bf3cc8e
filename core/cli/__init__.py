"""The headless CLI: `perfconsole run | sweep | attention | compare | import | export`, one module a command,
`main` for the parser and the flags shared with the console. The top of core/: may import any part.
"""
