"""`perfconsole gate`: did a change make the step slower? Two programs measured side by side on one machine,
their ratio's interval against a threshold, and a verdict a CI job can exit on (docs/gate.md).
May import: core.launch (the processes it runs), core.measure (only the paired worker's name), the shared
vocabulary; never core.reports or core.cli (the gate's reports read it, not the other way round).
"""
