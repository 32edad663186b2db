"""Capture strings that look like Rich/Textual markup: a view must show them literally.

A graph-break message and a guarded string constant both contain "[red]", "[/]" and "[bold]";
the message also holds an action link and terminal control sequences (retitle, clear screen).
"""

import torch


def tagged(x, tag):
    x = x + 1
    torch._dynamo.graph_break(msg="[red]x[/] [bold]not markup [@click=app.quit]q[/] \x1b]0;pwned\x07\x1b[2J")
    if tag == "[red]a[/]":
        return x * 2
    return x * 3


def main() -> None:
    compiled = torch.compile(tagged, backend="eager")
    x = torch.ones(3)
    compiled(x, "[red]a[/]")
    compiled(x, "[/]b[bold]")  # the string guard fails: a recompile whose expected/actual are markup-like


if __name__ == "__main__":
    main()
