"""What `tjc.explain(fn)(*args, **kwargs)` returns: the graphs, graph breaks and guards of one run.

The run compiles `fn` under a compile() call of its own (its own cache, dropped with the run), and
the frame compiler tells the report about every frame it compiled or left uncompiled
(convert_frame.FrameReport). The report holds the fx graphs and text, never the user's arguments.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class ExplainOutput:
    frames: list = dataclasses.field(default_factory=list)   # [FrameReport], in compile order

    def record(self, report) -> None:
        self.frames.append(report)

    @property
    def graphs(self) -> list:
        return [f.graph for f in self.frames if f.graph is not None]

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def ops_per_graph(self) -> list:
        """The ops of each graph, by name, in graph order."""
        return [list(f.ops) for f in self.frames if f.graph is not None]

    @property
    def break_reasons(self) -> list:
        """Each graph break: '<frame>: <reason at file:line (instruction)>'."""
        return [f"{f.frame}: {f.break_reason}" for f in self.frames if f.break_reason]

    @property
    def graph_break_count(self) -> int:
        return len(self.break_reasons)

    @property
    def fallbacks(self) -> list:
        """Frames that ran uncompiled, with the reason."""
        return [f"{f.frame}: {f.fallback_reason}" for f in self.frames if f.fallback_reason]

    @property
    def guards(self) -> list:
        return [f.guards for f in self.frames if f.guards]

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}",
                 f"Op count: {sum(f.op_count for f in self.frames)}"]
        for n, frame in enumerate(f for f in self.frames if f.graph is not None):
            lines.append(f"Graph {n} ({frame.frame}): {frame.op_count} ops: {', '.join(frame.ops)}")
        if self.break_reasons:
            lines.append("Break reasons:")
            lines += [f"  {n}. {reason}" for n, reason in enumerate(self.break_reasons, 1)]
        if self.fallbacks:
            lines.append("Ran uncompiled:")
            lines += [f"  - {reason}" for reason in self.fallbacks]
        if self.guards:
            lines.append("Guards:")
            for text in self.guards:
                lines += [f"  {line}" for line in text.splitlines()]
        return "\n".join(lines)
