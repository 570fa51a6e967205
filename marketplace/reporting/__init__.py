"""What a report says and how it reads, shared by every protocol and the runner: number and table
formatting (``format``), sweep plots (``plots``), the per-round history (``history``), the figures a
run without a world cannot give (``absent``) and what each owner gave up (``per_owner``).

It sits below the protocols, so a protocol's exchange builds its report sections and tables with
it without importing the runner that runs it; it knows no protocol and no runner.
"""
