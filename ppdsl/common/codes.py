"""Every diagnostic code ppdsl reports, in one registry: its summary, what it means, an example and the fix.

Messages, `ppdsl explain CODE`, the exit status and docs/language.md's table all read from here. A code's class
is its first letter:

  E0xx  the input cannot be used (syntax, names, types, command-line values, files): exit 2
  S1xx  the schedule is well formed but wrong for the requested sizes: exit 1

`explanations/` holds the longer texts, a file per code; a test checks that every code raised anywhere in the
package is here and that every example really produces its code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ppdsl.common.diagnostics import Diagnostic
    from ppdsl.common.explanations import Example, Explanation

EXIT_VALID, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class Code:
    code: str
    summary: str

    @property
    def exit_status(self) -> int:
        return EXIT_USAGE if self.code.startswith("E") else EXIT_INVALID

    @property
    def explanation(self) -> Explanation:
        """What the code means, a wrong example and the fixed one (`ppdsl explain`)."""
        from ppdsl.common.explanations import EXPLANATIONS  # only `explain`, the docs and the tests read these

        return EXPLANATIONS[self.code]


_SUMMARIES = {
    "E000": "a file cannot be read or written",
    "E001": "syntax error",
    "E002": "unknown name, job type, region, function or setting",
    "E003": "defined twice, or a built-in name redefined",
    "E004": "wrong arguments, or a `receives` / `sends` job without `before` / `after`",
    "E005": "an include is missing or includes itself",
    "E006": "the schedule has no `order` or `table`",
    "E007": "bad command-line sizes, parameters or options",
    "E008": "a cost file cannot be read, or holds something other than costs (an unknown key, a bad time or unit)",
    "E009": "a profile is not a Chrome trace with compute events",
    "E010": "a real number where an integer is needed",
    "E011": "mismatched types: a condition where a number is needed, or a number where a condition is needed",
    "E012": "a parameter's default is not a number or `true` / `false`",
    "E013": "a parameter's default uses `rank`, `chunk` or `stage`",
    "E014": "a function calls itself, or one call of it makes too many calls",
    "E015": "the sizes need more jobs than the limit (`--max-jobs`)",
    "E020": "malformed PyTorch schedule CSV",
    "E030": "PaddlePaddle is not installed",
    "E031": "a model (`--model module:function`) cannot be loaded",
    "E032": "the declared job types do not cover every op of the program exactly once",
    "E033": "a stream rule names an attribute the matched op does not have",
    "E034": "the schedule splits backwards, but the model's backward cannot be split",
    "E035": "ops of the program belong to no job",
    "E036": "the batch size does not split into the micro-batches",
    "E037": "a checkpoint cannot be resumed: missing, past --steps, or from another run (schedule, sizes, model, "
    "batch size, --lr, --optimizer, --seed)",
    "E038": "the processes of a launch do not match the pipeline degree",
    "E039": "a model's layers cannot be placed on the stages (`ctx.pipeline`: split, a weight shared in one process)",
    "E040": "a rank of a multi-process run failed",
    "E041": "`ppdsl synth --exact` or `--periodic` needs OR-Tools, which is not installed",
    "E042": "a synthesized schedule does not check as it was searched (a bug in ppdsl synth)",
    "E043": "a job reads a value that a later job of its micro-batch computes",
    "E044": "a Paddle program of your own lacks what a plan needs (op roles, a startup program run after the plan "
    "for its gradient accumulators), or a fetch the plan's job programs do not hold",
    "E045": "a rank's launch spec or plan (`spec.json`, `plan.json`) is not what its launcher wrote (its sha256 "
    "differs, a symlink, not a regular file)",
    "E046": "a model function (`--model module:function`) cannot be called with the model context",
    "E047": "a model function raised an error while building the model",
    "E048": "a model function returned something other than a scalar float loss",
    "E049": "a `--model` module's source changed after the launch checked it, or is not Python source a rank can run",
    "E050": "an output is a file the command reads (its schedule, an include, a cost file, a CSV, a profile)",
    "E051": "an input is not a regular file (a directory, a FIFO, a device)",
    "E052": "an input is larger than ppdsl reads (16 MiB for a schedule)",
    "E053": "an output cannot be written: a directory, a block device or socket, or the write failed (no space)",
    "E054": "a directory ppdsl writes into (or one above a run or save directory) can be changed by another user",
    "E058": "an output goes through another user's symlink, or replaces another user's file in a shared directory",
    "E059": "`ppdsl fmt DIR` found a symlink leading out of the tree it formats",
    "E070": "`--master` is not `HOST:PORT` with a port from 1 to 65535",
    "E071": "the rendezvous port of `--master` is taken on this machine",
    "E072": "the ranks did not meet within `--rendezvous-timeout` (a node never came)",
    "E073": "a multi-process run was stopped by a signal (SIGTERM, SIGINT, SIGHUP)",
    "E076": "a measured profile (`--measured`) is not a run of the schedule and sizes it is drawn as",
    "E077": "a document open in the editor is larger than the language server holds (16 MiB, as `ppdsl check` reads)",
    "E078": "the editor sent the language server a message it cannot frame (a `Content-Length` past its cap)",
    "E055": "a rule sets an op attribute that is not a stream, scheduling or communication attribute",
    "E056": "a rule's attribute has a type Paddle does not give it",
    "E057": "a rule's stream template is malformed or unbounded",
    "E060": "a loss, parameter or checkpoint holds NaN or infinity (training diverged)",
    "E061": "a checkpoint file is damaged: not a regular file, not a checkpoint archive, or bad metadata or arrays",
    "E062": "the ranks' checkpoints are not all at one step",
    "E063": "another run is saving checkpoints into the same --save-dir",
    "E064": "pipeline stages hold no op of the model (placed by hand, or a partition that allows empty stages)",
    "E065": "blocks, loops or an expression nested deeper than the language allows",
    "E066": "includes nested too deeply, or too many or too large in all",
    "E067": "an include names something that is not a `.sched` file (a device, a FIFO, a directory, another kind)",
    "E068": "a command's output or search would not fit its budget of memory or time at these sizes",
    "E075": "a `cost`, `comm` or `memory` declaration gives a negative, infinite or undefined number",
    "E086": "a memory job cannot run where its order puts it: a recompute or offload before its forward, a reload "
    "without its offload, a backward of offloaded activations before their reload",
    "E090": "a plan or checkpoint is of another version of the schedule's text (its fingerprint differs)",
    "E091": "a plan specification file (a launch's `plan.json`) is damaged or of another format",
    "E092": "at dp > 1, a chunk's gradients are never reduced: its `reduce_grads` is missing from the rank's order",
    "E093": "a collective (`reduce_grads` of a chunk, `sync_shared`) runs twice in a step",
    "E094": "a collective runs before the gradients it reduces are complete (its chunk's last backward / backward_w)",
    "E079": "`ppdsl synth --dp` above 1 with `--memory-actions`: synth does not place both together yet",
    "E095": "a parameter several stages hold (a tied embedding and head) has a rank without `sync_shared`",
    "E074": "a deadlock through a collective: a member waits in it for a rank that waits for that member",
    "E096": "`ppdsl fmt` found no `.sched` file in the paths it was given",
    "E097": "`ppdsl fmt` would have changed a file's tokens or comments (a bug): the file is left as it was",
    "E098": "a `# ppdsl:` directive (the sizes the language server checks a file at) cannot be read",
    "E099": "`ppdsl lsp` needs pygls, which is not installed",
    "E080": "a `memory` declaration's verb does not fit its job type (`keeps` is recompute's, `moves` offload's)",
    "E081": "an unknown `memory <subject> <setting>` (host limit, recompute / offload fraction)",
    "E082": "a memory action's fraction is not a literal number in (0, 1]",
    "E083": "synth was given a schedule with memory actions, which its engines do not time yet",
    "E088": "a memory limit is in another unit than memory is counted in: bytes (`2GiB`) without --model, a bare "
    "number or a schedule's activation limit with --model",
    "E084": "`ppdsl synth --memory-actions` names an action synth does not know (recompute, offload)",
    "E100": "a layer profile (`--layers`) is not JSON, or not one of its two forms (a missing, unknown or mistyped "
    "field)",
    "E101": "a layer profile gives a cost or a memory amount that is not a finite number from 0 to 1e15",
    "E102": "a layer profile's `pattern` has a letter its per-letter times do not give",
    "E103": "a partition (`--partition`, a `partition` statement) is neither layer counts nor a Megatron layout",
    "E104": "a partition does not fit: not one entry per virtual stage, not the profile's (or `run`'s model's) layer "
    "count or kinds, or a model `run` cannot split (placed by hand)",
    "E105": "a stage of the partition holds no layer, and the partition does not say `allow empty`",
    "E106": "a partition cannot be written as a Megatron layout (no partition, a placement other than looped, "
    "layers other than embedding, transformer and loss)",
    "E110": "`ppdsl synth --cost` gives a recompute, offload or reload cost without --memory-actions",
    "E111": "a cost file's real times with `--memory-actions offload`, but no time for the copies (offload, reload)",
    "S100": "a `require` is false for these sizes",
    "S101": "a rank never runs a job it owns",
    "S102": "a job runs twice, or a micro-batch has both a whole and a split backward",
    "S103": "local order: a backward before its forward, W before B, an auxiliary job on the wrong side",
    "S104": "the optimizer is missing or not last",
    "S105": "deadlock between ranks",
    "S106": "a rank holds more activations than the memory limit",
    "S107": "a micro-batch id outside 0 .. microbatches - 1",
    "S108": "a chunk outside 0 .. vpp - 1",
    "S109": "the placement is not one-to-one",
    "S110": "a negative or absurd repeat count",
    "S111": "division by zero or another arithmetic fault",
    "S112": "no table for these sizes",
    "S113": "the order takes more evaluation steps than these sizes allow",
    "S114": "no schedule fits the memory limit",
    "S115": "a recompute before its forward or after its backward",
    "S116": "an offload before its forward or after its backward",
    "S117": "a reload without its offload before it, or after its backward",
    "S118": "the backward of an offloaded micro-batch runs without its reload",
    "S119": "offloads hold more host memory than `memory host limit`",
}

REGISTRY: dict[str, Code] = {code: Code(code, summary) for code, summary in _SUMMARIES.items()}


def lookup(code: str) -> Code | None:
    """The registered code, written any case (`e010` is `E010`); None if there is no such code."""
    return REGISTRY.get(code.strip().upper())


def exit_code(diagnostics: Iterable[Diagnostic]) -> int:
    """The exit status of a command that found these errors: 2 if any is a usage error (E), else 1; 0 if none."""
    statuses = [REGISTRY[d.code].exit_status if d.code in REGISTRY else EXIT_INVALID for d in diagnostics]
    return max(statuses, default=EXIT_VALID)


def markdown_table() -> str:
    """docs/language.md's table of codes (a test keeps the docs equal to it)."""
    escaped = {c.code: c.summary.replace("|", "\\|") for c in REGISTRY.values()}  # a `|` would end the cell
    rows = [f"| {c.code} | {escaped[c.code]} | {c.exit_status} |" for c in REGISTRY.values()]
    return "\n".join(["| code | meaning | exit |", "|---|---|---|", *rows])


def explain(code: Code, width: int = 100) -> str:
    """`ppdsl explain CODE`: the summary, the explanation, the wrong example and the fixed one, as plain text."""
    import textwrap

    text = code.explanation
    out = [f"{code.code}: {code.summary} (exit status {code.exit_status})", ""]
    out += textwrap.wrap(text.text, width)
    for title, example in (("Wrong", text.wrong), ("Fixed", text.fixed)):
        out += ["", f"{title}:", ""]
        out += _example_lines(example)
    return "\n".join(out) + "\n"


def _example_lines(example: Example) -> list[str]:
    lines = [f"  ({example.note})", ""] if example.note else []
    for name, content in example.files:
        lines.append(f"  {name}:")
        lines += [f"      {line}".rstrip() for line in content.rstrip("\n").split("\n")]
        lines.append("")
    lines += [f"  $ {command}" for command in example.commands]
    return lines
