"""Reasons are data: every note, unknown reason, assumption and error has a code from
`ReasonCode`, the one registry, and is worded here only.

A `Reason` is the text a user reads (a `str`, so the public API and every renderer read
it unchanged) that carries its code and facts: the stages decide by code, never by
comparing words. A stage makes one with `reason(code, **facts)` and asks with
`has_code(text, code)`. This module is the report stage's one leaf that every stage
may import (tests/test_layers.py): it imports nothing of racecheck.

Converting a stage's prose: add a code and its wording below, replace the literal with
`reason(ReasonCode.X, fact=value)`; the output stays byte-identical.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType


class ReasonCode(Enum):
    # notes on a program's result (judge)
    REPEAT = "repeat"
    RESET_WINDOWS = "reset-windows"
    ROUNDS_JOINED = "rounds-joined"
    RESET_ASSUMED_STATE = "reset-assumed-state"
    PER_CALL = "per-call"
    SINGLE_DEVICE = "single-device"
    SINGLE_USE = "single-use"
    # why a program is not proved for every P (allp)
    EVERY_P_REPEAT = "every-p-repeat"
    EVERY_P_NO_ORIGIN = "every-p-no-origin"
    EVERY_P_REJECTS_ALL = "every-p-rejects-all"
    EVERY_P_UNDECIDED = "every-p-undecided"
    EVERY_P_REFUTED = "every-p-refuted"
    EVERY_P_INT32 = "every-p-int32"
    EVERY_P_INPUT_WRITTEN = "every-p-input-written"
    EVERY_P_INPUT_WAITED = "every-p-input-waited"
    EVERY_P_WINDOW_WRITER = "every-p-window-writer"
    EVERY_P_WINDOW_VALUE = "every-p-window-value"
    # what a proof for every P assumes (allp)
    ASSUME_LOW = "assume-low"
    ASSUME_BELOW = "assume-below"
    ASSUME_ACCEPTS = "assume-accepts"
    ASSUME_MODEL = "assume-model"
    ASSUME_SCOPE = "assume-scope"
    ASSUME_UNCHECKED = "assume-unchecked"
    ASSUME_DISCHARGED = "assume-discharged"
    ASSUME_INPUTS = "assume-inputs"
    ASSUME_WINDOW_READ = "assume-window-read"
    # why a result is unknown, or what it leaves unchecked (judge)
    HUNG_UNFOUND = "hung-unfound"
    MORE_UNCHECKED = "more-unchecked"
    WITNESS_UNREPLAYED = "witness-unreplayed"
    WITNESS_DIVERGED = "witness-diverged"
    # errors (judge)
    EXPECT_NOT_APPLICABLE = "expect-not-applicable"
    # why path exploration stopped or left a value open (paths, steering)
    PATH_UNREALISED = "path-unrealised"
    PATHS_BUDGET = "paths-budget"
    PATHS_SATURATED = "paths-saturated"
    ORDERS_NOT_ENUMERATED = "orders-not-enumerated"
    INPUT_NOT_SYMBOLIC = "input-not-symbolic"
    INPUTS_UNDECIDED = "inputs-undecided"
    OPEN_INPUT = "open-input"
    OPEN_ORDER = "open-order"
    # what the every-P tracer does not follow (allp: OutsideFragment)
    OUTSIDE_HOST_ROW = "outside-host-row"
    OUTSIDE_TILE_VALUE = "outside-tile-value"
    OUTSIDE_NOT_VIEW = "outside-not-view"
    OUTSIDE_REMOTE_HOST = "outside-remote-host"
    OUTSIDE_NOT_TILE = "outside-not-tile"
    OUTSIDE_DIM_NOT_P = "outside-dim-not-p"
    OUTSIDE_HOST_DIM = "outside-host-dim"
    OUTSIDE_NOT_PROGRAM = "outside-not-program"
    OUTSIDE_NO_HOST_ENTRY = "outside-no-host-entry"
    OUTSIDE_NO_RANK_PARAMETER = "outside-no-rank-parameter"
    OUTSIDE_PATHS = "outside-paths"
    OUTSIDE_NO_DISPATCH_LOOP = "outside-no-dispatch-loop"
    OUTSIDE_NOT_INTEGER = "outside-not-integer"
    OUTSIDE_DIVISOR_SIGN = "outside-divisor-sign"
    OUTSIDE_DIVISION_CASES = "outside-division-cases"
    OUTSIDE_QUOTIENT = "outside-quotient"
    OUTSIDE_INT32 = "outside-int32"
    OUTSIDE_COMPARISON = "outside-comparison"
    OUTSIDE_HASHED_VALUE = "outside-hashed-value"
    OUTSIDE_HASHED_CONDITION = "outside-hashed-condition"
    OUTSIDE_AS_TEXT = "outside-as-text"
    OUTSIDE_DECISIONS = "outside-decisions"
    OUTSIDE_ESCAPED_INDEX = "outside-escaped-index"
    OUTSIDE_STEP = "outside-step"
    OUTSIDE_RANGE_NOT_FOR = "outside-range-not-for"
    OUTSIDE_LEFT_EARLY = "outside-left-early"
    OUTSIDE_PASSES = "outside-passes"
    OUTSIDE_PARTLY_BOUND = "outside-partly-bound"
    OUTSIDE_ZERO_TRIPS = "outside-zero-trips"
    OUTSIDE_DISPATCH_OUTSIDE_LOOP = "outside-dispatch-outside-loop"
    OUTSIDE_NO_DISPATCH = "outside-no-dispatch"
    OUTSIDE_RAISES_IN_LOOP = "outside-raises-in-loop"
    OUTSIDE_RAISES_ALWAYS = "outside-raises-always"
    OUTSIDE_RAISES_ON_SOME_RANKS = "outside-raises-on-some-ranks"
    OUTSIDE_NOT_BOUND = "outside-not-bound"
    OUTSIDE_CARRIES_CONTAINER = "outside-carries-container"
    OUTSIDE_CARRIES_VALUE = "outside-carries-value"
    OUTSIDE_CARRIES_BY_PATH = "outside-carries-by-path"
    # the loader: errors and how user code failed (load)
    NO_SUCH_FILE = "no-such-file"
    UNREADABLE = "unreadable"
    SYNTAX = "syntax"
    IMPORT_FAILED = "import-failed"
    RAISED = "raised"
    NO_PROGRAM = "no-program"
    REJECTED_SILENTLY = "rejected-silently"
    EXITED = "exited"
    NO_HOST_ENTRY = "no-host-entry"
    NOT_A_PROGRAM = "not-a-program"
    HOST_PARAMETER_UNBOUND = "host-parameter-unbound"
    DIM_UNBOUND = "dim-unbound"
    ARG_FAILED = "arg-failed"
    RANK_PARAM_UNKNOWN = "rank-param-unknown"
    ARG_IS_RANK_COUNT = "arg-is-rank-count"
    FACTORY_PARAMETER_UNBOUND = "factory-parameter-unbound"
    L2_UNANNOTATED = "l2-unannotated"
    RANK_PARAM_UNUSED = "rank-param-unused"
    ARG_UNKNOWN = "arg-unknown"
    ONLY_SINGLE_CHIP = "only-single-chip"
    NO_SUCH_PROGRAM = "no-such-program"
    # what makes an option's value unusable (options: UsageError)
    # what a run says of itself (clock, while_loops)
    OVERTIME = "overtime"
    OVERTIME_AT = "overtime-at"
    OVERTIME_SECONDS = "overtime-seconds"
    OVERTIME_SECONDS_AT = "overtime-seconds-at"
    WHILE_LOOP = "while-loop"
    ASSUME_EMPTY_RANGE = "assume-empty-range"
    ASSUME_FLAG_SYNTAX = "assume-flag-syntax"
    ASSUME_COMMENT_SYNTAX = "assume-comment-syntax"
    ASSUME_FLAG = "assume-flag"
    ASSUME_COMMENT = "assume-comment"
    ASSUME_NO_TENSOR = "assume-no-tensor"
    USAGE_RANK_RANGE = "usage-rank-range"
    USAGE_NOT_CHOICE = "usage-not-choice"
    USAGE_NOT_BOOL = "usage-not-bool"
    USAGE_EMPTY_NAME = "usage-empty-name"
    USAGE_RANK_PARAM = "usage-rank-param"
    USAGE_ARGV_TYPES = "usage-argv-types"
    USAGE_ENV = "usage-env"
    USAGE_IMPORT_ROOT = "usage-import-root"
    USAGE_ARG_IS_P = "usage-arg-is-p"
    USAGE_COUNT = "usage-count"
    USAGE_PER_CALL = "usage-per-call"
    USAGE_PER_CALL_ARG = "usage-per-call-arg"
    USAGE_PER_CALL_RESET = "usage-per-call-reset"
    PER_CALL_NOT_SCALAR = "per-call-not-scalar"
    USAGE_SECONDS = "usage-seconds"
    USAGE_BOOL_TEXT = "usage-bool-text"
    USAGE_UNKNOWN_CHOICE = "usage-unknown-choice"
    USAGE_EMPTY_RANGE = "usage-empty-range"
    USAGE_FALLBACK = "usage-fallback"
    USAGE_RANK_COUNT = "usage-rank-count"
    USAGE_ARG = "usage-arg"
    USAGE_ONE_FILE = "usage-one-file"
    USAGE_ARGV_SPLIT = "usage-argv-split"
    USAGE_UNWRITABLE = "usage-unwritable"
    USAGE_TRACE_RANKS = "usage-trace-ranks"
    # what makes a [tool.racecheck] table unusable (config: UsageError)
    CONFIG_UNREADABLE = "config-unreadable"
    CONFIG_TABLE = "config-table"
    CONFIG_FILE_TABLE = "config-file-table"
    CONFIG_NOT_TABLE = "config-not-table"
    CONFIG_FILES_NOT_TABLES = "config-files-not-tables"
    CONFIG_NO_PATH = "config-no-path"
    CONFIG_UNKNOWN_KEY = "config-unknown-key"
    CONFIG_IN_TABLE = "config-in-table"
    CONFIG_WRONG_VALUE = "config-wrong-value"
    CONFIG_EXPECTED_RANKS = "config-expected-ranks"
    CONFIG_EXPECTED_ARGS = "config-expected-args"
    CONFIG_EXPECTED_TEXTS = "config-expected-texts"
    CONFIG_EXPECTED_STRINGS = "config-expected-strings"
    CONFIG_EXPECTED_BOOL = "config-expected-bool"
    CONFIG_EXPECTED_STRING = "config-expected-string"
    CONFIG_BAD_EXPECT = "config-bad-expect"
    CONFIG_NO_GOLDEN = "config-no-golden"
    CONFIG_UNMATCHED = "config-unmatched"
    CONFIG_MATCHES_NO_FILE = "config-matches-no-file"
    # how a golden model's name is misspelt (model_names: UsageError)
    GOLDEN_NOT_FUNCTION = "golden-not-function"
    GOLDEN_UNKNOWN = "golden-unknown"
    FILE_GOLDEN_TOO_LARGE = "file-golden-too-large"
    FILE_GOLDEN_NO_PARAMETER = "file-golden-no-parameter"
    FILE_GOLDEN_SHAPE = "file-golden-shape"
    FILE_GOLDEN_RAISED = "file-golden-raised"
    FILE_GOLDEN_OTHER_SHAPE = "file-golden-other-shape"
    FILE_GOLDEN_MATCHES = "file-golden-matches"
    FILE_GOLDEN_DIFFERS = "file-golden-differs"
    GOLDEN_LEADING_DIM = "golden-leading-dim"
    GOLDEN_ROW_BLOCKS = "golden-row-blocks"
    GOLDEN_ROOT_OUTSIDE = "golden-root-outside"
    GOLDEN_UNKNOWN_DTYPE = "golden-unknown-dtype"
    GOLDEN_TIMES = "golden-times"
    GOLDEN_CANNOT_REPEAT = "golden-cannot-repeat"
    GOLDEN_NO_FUNCTION = "golden-no-function"
    GOLDEN_RAISED = "golden-raised"
    GOLDEN_NO_FILE = "golden-no-file"
    GOLDEN_CANNOT_IMPORT = "golden-cannot-import"
    GOLDEN_IMPORT_FAILED = "golden-import-failed"
    HELP_PYTEST_RACECHECK = "help-pytest-racecheck"
    PYTEST_NO_CONFIG = "pytest-no-config"
    FILE_GOLDEN_NEEDS_TORCH = "file-golden-needs-torch"
    # whether the file's own inputs were used (file_harness, file_goldens)
    FILE_INPUTS_USED = "file-inputs-used"
    FILE_INPUTS_USED_WITHOUT_TORCH = "file-inputs-used-without-torch"
    FILE_INPUTS_NOT_REACHED = "file-inputs-not-reached"
    FILE_INPUTS_NEED_TORCH = "file-inputs-need-torch"
    FILE_INPUTS_NOT_RUN = "file-inputs-not-run"
    # what the every-P shadow of pl/pld does not follow (allp/shadow.py)
    SHADOW_SCALAR_ARITHMETIC = "shadow-scalar-arithmetic"
    SHADOW_DISPATCH_LOOPS = "shadow-dispatch-loops"
    SHADOW_DEVICE_NOT_INDEX = "shadow-device-not-index"
    SHADOW_DISPATCH_START = "shadow-dispatch-start"
    SHADOW_TWO_KERNELS = "shadow-two-kernels"
    SHADOW_DEFERRED_ALLGATHER = "shadow-deferred-allgather"
    SHADOW_FOUR_ARGUMENTS = "shadow-four-arguments"
    SHADOW_SOURCE_IS_TARGET = "shadow-source-is-target"
    SHADOW_HOST_KERNEL_CAP = "shadow-host-kernel-cap"
    SHADOW_BLOCK_SIZE = "shadow-block-size"
    SHADOW_RANGE_CARRY = "shadow-range-carry"
    SHADOW_RANGE_ARGS = "shadow-range-args"
    SHADOW_SYMBOLIC_STEP = "shadow-symbolic-step"
    SHADOW_ALLOC_NO_DTYPE = "shadow-alloc-no-dtype"
    SHADOW_ALLOC_INSIDE = "shadow-alloc-inside"
    SHADOW_WINDOW_OF = "shadow-window-of"
    SHADOW_ACCESS_RANK = "shadow-access-rank"
    SHADOW_ACCESS_TO = "shadow-access-to"
    SHADOW_NOTIFY_OP = "shadow-notify-op"
    SHADOW_WAIT_ARGUMENTS = "shadow-wait-arguments"
    SHADOW_WAIT_CMP = "shadow-wait-cmp"
    SHADOW_WHOLE_SLICE_SIZES = "shadow-whole-slice-sizes"
    SHADOW_REMOTE_NOT_WINDOW = "shadow-remote-not-window"
    SHADOW_REGION_SIZES = "shadow-region-sizes"
    SHADOW_NAME = "shadow-name"
    SHADOW_READ_NOT_INPUT = "shadow-read-not-input"
    SHADOW_READ_DTYPE = "shadow-read-dtype"
    SHADOW_CAST = "shadow-cast"
    OUTSIDE_INPUT_SYNC = "outside-input-sync"
    # what the every-P prover discharges (allp/obligations.py Obligation)
    OBLIGATION_BOUNDS = "obligation-bounds"
    OBLIGATION_UNIQUE_WRITER = "obligation-unique-writer"
    OBLIGATION_WAIT_VALUE = "obligation-wait-value"
    OBLIGATION_NOTIFY_EXISTS = "obligation-notify-exists"
    OBLIGATION_NO_CIRCULAR_WAIT = "obligation-no-circular-wait"
    OBLIGATION_ORDERED = "obligation-ordered"
    OBLIGATION_PARALLEL = "obligation-parallel"
    # what the every-P prover refuses (allp/__init__.py)
    EVERY_P_DEFER_WAIT = "every-p-defer-wait"
    EVERY_P_SIGNAL_STORE = "every-p-signal-store"
    EVERY_P_SET_ADD = "every-p-set-add"
    # the user's names for threads, signal cells and units (events, describe)
    RANK_ALONE = "rank-alone"
    THREAD_OF_RANK = "thread-of-rank"
    THREAD_ON_RANK = "thread-on-rank"
    CELL_TASK_END = "cell-task-end"
    CELL_HOST_JOIN = "cell-host-join"
    UNIT_DISPATCH_START = "unit-dispatch-start"
    UNIT_DISPATCH_LOCK = "unit-dispatch-lock"
    UNIT_FREE = "unit-free"
    HOLDERS_SHARING = "holders-sharing"
    HOLDERS_ONE_MORE = "holders-one-more"
    HOLDERS_MORE = "holders-more"
    HELD_BY = "held-by"
    # what the engines say: why one cannot decide, what it was doing when cut (engines/)
    ENGINE_NONE_EXACT = "engine-none-exact"
    ENGINE_CANNOT = "engine-cannot"
    ENGINE_NONE = "engine-none"
    CELL_INEXACT = "cell-inexact"
    CELL_UNITS = "cell-units"
    MONOTONE_EQ_WAIT = "monotone-eq-wait"
    MONOTONE_NEGATIVE_SET = "monotone-negative-set"
    MONOTONE_NEGATIVE_ADD = "monotone-negative-add"
    MONOTONE_MIXED_SET = "monotone-mixed-set"
    MONOTONE_WRAP = "monotone-wrap"
    MONOTONE_UNSIGNED_NEGATIVE = "monotone-unsigned-negative"
    EXPLORE_MACRO_STATES = "explore-macro-states"
    EXPLORE_POR_STEPS = "explore-por-steps"
    SMT_UNDECIDED = "smt-undecided"
    SMT_ASKS_RUN = "smt-asks-run"
    SMT_ASKS_BEFORE = "smt-asks-before"
    SMT_ASKS_DEADLOCK = "smt-asks-deadlock"
    SMT_EVENT = "smt-event"
    SMT_NO_EXECUTION = "smt-no-execution"
    SMT_NOT_A_WITNESS = "smt-not-a-witness"
    SMT_MODEL_NOT_RUN = "smt-model-not-run"
    SMT_NOT_STUCK = "smt-not-stuck"
    Z3_BUDGET = "z3-budget"
    STAGE_BOUNDING = "stage-bounding"
    STAGE_ANALYSIS_ORDERS = "stage-analysis-orders"
    STAGE_ANALYSIS_EVENT = "stage-analysis-event"
    STAGE_ANALYSIS_PAIR = "stage-analysis-pair"
    STAGE_EXPLORE = "stage-explore"
    STAGE_MONOTONE = "stage-monotone"
    STAGE_MONOTONE_HOLDING = "stage-monotone-holding"
    STAGE_SMT_ENCODING = "stage-smt-encoding"
    STAGE_SMT_STUCK = "stage-smt-stuck"
    STAGE_SMT_RANK = "stage-smt-rank"
    STAGE_SMT_WAIT = "stage-smt-wait"
    STAGE_SMT_ASKED = "stage-smt-asked"
    EXPLORE_NO_WITNESS = "explore-no-witness"
    STAGE_CHOOSING_INPUTS = "stage-choosing-inputs"
    # what the co-simulation says of a run: its limits, what it does not follow (cosim/)
    HOST_ROW_OUTSIDE = "host-row-outside"
    DISPATCH_DEVICE_OUTSIDE = "dispatch-device-outside"
    HOST_ROWS = "host-rows"
    DEFER_WAIT_THEN_ACCESS = "defer-wait-then-access"
    SPLIT_AIV_IN_PLACE = "split-aiv-in-place"
    SPLIT_AIV_OUTSIDE = "split-aiv-outside"
    PEER_OUTSIDE = "peer-outside"
    SIGNAL_NOT_INT32 = "signal-not-int32"
    EVENT_BUDGET = "event-budget"
    STAGE_HOST_ENTRY = "stage-host-entry"
    HOST_ENTRY_OVERRUN = "host-entry-overrun"
    TRACING_OVERTIME = "tracing-overtime"
    TRACING_OVERTIME_AT = "tracing-overtime-at"
    HOST_TENSOR_CROSSING = "host-tensor-crossing"
    CROSSING_READ = "crossing-read"
    CROSSING_WRITE = "crossing-write"
    # what the pipeline says: paths, the reference's runs, the gate
    SUMMARY_NOT_EVERY_INPUT = "summary-not-every-input"
    SUMMARY_UNDECIDED = "summary-undecided"
    STAGE_OTHER_PATHS = "stage-other-paths"
    STAGE_BUILDING = "stage-building"
    BUILDING_OVERRUN = "building-overrun"
    STAGE_CARRIED_STATE = "stage-carried-state"
    STAGE_RACE_SEARCH = "stage-race-search"
    STAGE_PATH_REPLAY = "stage-path-replay"
    STAGE_WITNESS_REPLAY = "stage-witness-replay"
    STAGE_INTERLEAVED = "stage-interleaved"
    GATE_NO_MODEL = "gate-no-model"
    GATE_NOT_EVERY_P = "gate-not-every-p"
    # how a finding code is named: its title, SARIF rule, highlighted step (findings)
    FINDING_DATA_RACE = "finding-data-race"
    FINDING_DEADLOCK = "finding-deadlock"
    FINDING_OUT_OF_BOUNDS = "finding-out-of-bounds"
    FINDING_STALE_READ = "finding-stale-read"
    FINDING_WRONG_RESULT = "finding-wrong-result"
    RULE_RACE_RAW = "rule-race-raw"
    RULE_RACE_WAR = "rule-race-war"
    RULE_RACE_WAW = "rule-race-waw"
    RULE_SET_ADD_MIX = "rule-set-add-mix"
    RULE_STALE_READ = "rule-stale-read"
    STEP_OF_FINDING = "step-of-finding"
    STEP_RACING = "step-racing"
    STEP_BLOCKED = "step-blocked"
    STEP_UNWRITTEN = "step-unwritten"
    # what the CLI and export say of a run (cli, export)
    INTERRUPTED = "interrupted"
    INTERNAL_ERROR = "internal-error"
    EXPORT_ONE_PROGRAM = "export-one-program"
    EXPORT_REJECTED = "export-rejected"
    EXPORT_HEADER = "export-header"
    CLI_VERSION = "cli-version"
    CLI_PROGRESS = "cli-progress"
    CLI_SKIPPED = "cli-skipped"
    TRACE_SKIPPED = "trace-skipped"
    # the CLI's help: each flag's words (cli)
    HELP_DESCRIPTION = "help-description"
    HELP_VERSION = "help-version"
    HELP_VERIFY = "help-verify"
    HELP_VERIFY_DESCRIPTION = "help-verify-description"
    HELP_RANKS = "help-ranks"
    HELP_FALLBACK = "help-fallback"
    HELP_REQUIRE_EVERY_P = "help-require-every-p"
    HELP_ENGINE = "help-engine"
    HELP_EXPECT = "help-expect"
    HELP_REQUIRE_MODEL = "help-require-model"
    HELP_TIMEOUT = "help-timeout"
    HELP_ASSUME = "help-assume"
    HELP_JOBS = "help-jobs"
    HELP_DEFAULT = "help-default"
    HELP_HTML = "help-html"
    HELP_NO_COLOR = "help-no-color"
    HELP_RESET_WINDOWS = "help-reset-windows"
    HELP_ROUNDS = "help-rounds"
    HELP_PER_CALL = "help-per-call"
    HELP_SKIP_NO_PROGRAM = "help-skip-no-program"
    HELP_NO_CONFIG = "help-no-config"
    HELP_RUNTIME_ORDER = "help-runtime-order"
    HELP_TRACE = "help-trace"
    HELP_ONE_RANK_COUNT = "help-one-rank-count"
    HELP_EXPORT = "help-export"
    HELP_FILE = "help-file"
    HELP_PROGRAM = "help-program"
    HELP_ARG = "help-arg"
    HELP_RANK_PARAM = "help-rank-param"
    HELP_REPEAT = "help-repeat"
    HELP_SEED = "help-seed"
    HELP_CORES = "help-cores"
    HELP_ARGV = "help-argv"
    HELP_ENV = "help-env"
    HELP_IMPORT_ROOT = "help-import-root"
    HELP_DEBUG = "help-debug"
    # the DSL's refusals and errors of a program's calls (dsl/dist_ops.py, dsl/program.py)
    DSL_WORLD_SIZE_OUTSIDE = "dsl-world-size-outside"
    DSL_ALLOC_NO_DTYPE = "dsl-alloc-no-dtype"
    DSL_WINDOW_NOT_BUFFER = "dsl-window-not-buffer"
    DSL_NOT_WINDOW = "dsl-not-window"
    DSL_NOT_CHOICE = "dsl-not-choice"
    DSL_WAIT_ARGUMENTS = "dsl-wait-arguments"
    DSL_DEFER_WAIT_GE = "dsl-defer-wait-ge"
    DSL_ATOMIC = "dsl-atomic"
    DSL_SLICE_TOGETHER = "dsl-slice-together"
    DSL_WHOLE_SLICE_SIZES = "dsl-whole-slice-sizes"
    DSL_NOT_RECOMPILED = "dsl-not-recompiled"
    DSL_NO_DEVICE = "dsl-no-device"
    DSL_SUB_WORKER_WRITES = "dsl-sub-worker-writes"
    DSL_SUB_WORKER_READS = "dsl-sub-worker-reads"
    DSL_SUBMIT_KERNEL = "dsl-submit-kernel"
    DSL_SUBMIT_PREDICATE = "dsl-submit-predicate"
    DSL_NOT_RUN = "dsl-not-run"
    DSL_NO_JIT_FUNCTION = "dsl-no-jit-function"
    # the sort, gather, scatter, cmp and concat operations of a kernel (dsl/sort_ops.py)
    SORT_NOT_TILE = "sort-not-tile"
    SORT_PAIRS_DTYPE = "sort-pairs-dtype"
    SORT_PARTLY_VALID = "sort-partly-valid"
    SORT32_DTYPE = "sort32-dtype"
    SORT32_SHAPES = "sort32-shapes"
    MRGSORT_BLOCK_LEN = "mrgsort-block-len"
    MRGSORT_ONE_SOURCE = "mrgsort-one-source"
    MRGSORT_ROWS = "mrgsort-rows"
    MRGSORT_EXHAUSTED = "mrgsort-exhausted"
    MRGSORT_SHAPES = "mrgsort-shapes"
    GATHER_MASK = "gather-mask"
    GATHER_MASK_ROWS = "gather-mask-rows"
    GATHER_OUTPUT_DTYPE = "gather-output-dtype"
    SCATTER_BOTH_FORMS = "scatter-both-forms"
    SCATTER_INDEX_FORM = "scatter-index-form"
    SCATTER_INDEX_OUTSIDE = "scatter-index-outside"
    SCATTER_MASK = "scatter-mask"
    SCATTER_MASK_COLUMNS = "scatter-mask-columns"
    CMP_TYPE = "cmp-type"
    CONCAT_SHAPES = "concat-shapes"
    CONCAT_PARTLY_VALID = "concat-partly-valid"
    # the tensor views, tiles and tile operations of a kernel (dsl/tensors.py, tile_*.py, types.py)
    VIEW_ROW_OUTSIDE = "view-row-outside"
    VIEW_NOT_CONTIGUOUS = "view-not-contiguous"
    VIEW_SLICE_STEP = "view-slice-step"
    VIEW_SLICE_OUTSIDE = "view-slice-outside"
    VIEW_INDEX_OUTSIDE = "view-index-outside"
    TILE_SLICE_STEP = "tile-slice-step"
    TILE_SLICE_OUTSIDE = "tile-slice-outside"
    REGION_DIMS = "region-dims"
    REGION_EXCEEDS = "region-exceeds"
    REGION_PAST_BUFFER = "region-past-buffer"
    TILE_MATH_NOT_TILE = "tile-math-not-tile"
    TILE_VALIDSHAPE_PAST = "tile-validshape-past"
    TILE_FILLPAD_VALUE = "tile-fillpad-value"
    TILE_GATHER_FORM = "tile-gather-form"
    TILE_GATHER_AXIS = "tile-gather-axis"
    TILE_GATHER_INDEX = "tile-gather-index"
    TILE_ARANGE_SHAPE = "tile-arange-shape"
    TILE_GATHER_ROW = "tile-gather-row"
    TILE_NEEDS_DTYPE = "tile-needs-dtype"
    TILE_MANUAL_DEP_OUTSIDE = "tile-manual-dep-outside"
    TILE_INIT_VALUE = "tile-init-value"
    TILE_INIT_VALUE_DTYPE = "tile-init-value-dtype"
    TILE_RESHAPE_COUNT = "tile-reshape-count"
    TILE_DIM_NOT_TENSOR = "tile-dim-not-tensor"
    TILE_NEEDS_TILE = "tile-needs-tile"
    TILE_RESHAPE_VALID = "tile-reshape-valid"
    TILE_RESHAPE_REGION = "tile-reshape-region"
    TILE_ASSEMBLE_ATOMIC = "tile-assemble-atomic"
    TYPE_DYNAMIC_DIM = "type-dynamic-dim"
    TYPE_TENSOR_ARGUMENTS = "type-tensor-arguments"
    TYPE_NEEDS_DTYPE = "type-needs-dtype"
    TYPE_ARRAY_ARGUMENTS = "type-array-arguments"
    # what the DSL's device groups, pl.parallel, summaries and --timeout say (dsl/)
    GROUP_RANGE = "group-range"
    GROUP_PEER_OUTSIDE = "group-peer-outside"
    GROUP_RANK_OUTSIDE = "group-rank-outside"
    PARALLEL_SIGNAL = "parallel-signal"
    PARALLEL_OVERLAP = "parallel-overlap"
    PARALLEL_ITERATIONS = "parallel-iterations"
    SUMMARY_BODY_SYNCS = "summary-body-syncs"
    SUMMARY_LOOP_NOT_FOUND = "summary-loop-not-found"
    SUMMARY_LOOP_OUTLIVES = "summary-loop-outlives"
    SUMMARY_BRANCH_NOT_FOUND = "summary-branch-not-found"
    SUMMARY_COUNTER_FORM = "summary-counter-form"
    SUMMARY_BRANCH_OUTLIVES = "summary-branch-outlives"
    WATCHDOG_OVERRUN = "watchdog-overrun"
    WATCHDOG_OVERRUN_AT = "watchdog-overrun-at"
    # the DSL's other refusals and unfollowed values (dsl/modules, context, scalars, ...)
    DSL_NOT_MODELLED = "dsl-not-modelled"
    DSL_DRIVER_OBJECT = "dsl-driver-object"
    DSL_DRIVER_CALL = "dsl-driver-call"
    DSL_NEEDS_TORCH = "dsl-needs-torch"
    DSL_RANK_ONLY = "dsl-rank-only"
    DSL_HOST_ONLY = "dsl-host-only"
    DSL_RESULT_RANGE = "dsl-result-range"
    DSL_HANDED_RANGE = "dsl-handed-range"
    DSL_NOT_INTEGER = "dsl-not-integer"
    DSL_SPLIT = "dsl-split"
    DSL_COPY_SIZES = "dsl-copy-sizes"
    DSL_WINDOW_ARGUMENT_SIZE = "dsl-window-argument-size"
    # the host function's pl.at and pl.spmd regions racecheck does not follow (dsl/host_regions.py)
    REGION_NO_SOURCE = "region-no-source"
    REGION_SHARED_WITH = "region-shared-with"
    REGION_HOST_WORKER = "region-host-worker"
    REGION_INLINE = "region-inline"
    REGION_SPMD_NO_SOURCE = "region-spmd-no-source"
    REGION_TASK_REASSIGNS = "region-task-reassigns"
    REGION_TASK_ASSIGNS = "region-task-assigns"
    REGION_CHIP_WITHOUT_DEVICE = "region-chip-without-device"
    # the tasks, deps and scopes a per-device function uses (dsl/scopes.py)
    THREAD_TASK = "thread-task"
    THREAD_BLOCK = "thread-block"
    SCOPE_OUTSIDE_DEVICE = "scope-outside-device"
    SCOPE_NOT_TASK_ID = "scope-not-task-id"
    SCOPE_SLOT_UNSET = "scope-slot-unset"
    SCOPE_TASK_ID_ARGUMENT = "scope-task-id-argument"
    SCOPE_WRITES_LOCAL = "scope-writes-local"
    SCOPE_RESULTS_UNMATCHED = "scope-results-unmatched"
    SCOPE_DISPATCH_RESULTS = "scope-dispatch-results"
    SCOPE_RESULT_UNDECLARED = "scope-result-undeclared"
    SCOPE_HELD_BACK = "scope-held-back"
    SCOPE_NO_DEP_IN_MANUAL = "scope-no-dep-in-manual"
    SCOPE_SPMD_PREDICATE = "scope-spmd-predicate"
    SCOPE_DEPS_NOT_IDS = "scope-deps-not-ids"
    SCOPE_MANUAL_NESTED = "scope-manual-nested"
    SCOPE_AUTO_IN_MANUAL = "scope-auto-in-manual"
    SCOPE_AUTO_OUTSIDE_OWN = "scope-auto-outside-own"
    # what pld.tensor.put_async and its drain may not do (dsl/async_put.py)
    ASYNC_SYNC_ID = "async-sync-id"
    ASYNC_NO_SESSION = "async-no-session"
    ASYNC_NOT_PENDING = "async-not-pending"
    ASYNC_OTHER_SESSION = "async-other-session"
    ASYNC_WAIT_IN_FLIGHT = "async-wait-in-flight"
    ASYNC_TOUCH_IN_FLIGHT = "async-touch-in-flight"
    ASYNC_NEVER_DRAINED = "async-never-drained"
    # pld.all_reduce and the other collective calls (dsl/collective_api.py)
    PYPTO_REJECTS = "pypto-rejects"
    COLLECTIVE_NRANKS = "collective-nranks"
    COLLECTIVE_NRANKS_MESH = "collective-nranks-mesh"
    # what a collective's lowering says of its operands (dsl/lowering.py)
    LOWERING_RETURNS_AT_ONCE = "lowering-returns-at-once"
    LOWERING_OP = "lowering-op"
    LOWERING_RING_SIGNAL = "lowering-ring-signal"
    LOWERING_RING_OPERANDS = "lowering-ring-operands"
    LOWERING_UNFLUSHED = "lowering-unflushed"
    LOWERING_OUT_SHORT = "lowering-out-short"
    LOWERING_ROWS = "lowering-rows"
    # the collective builtins PyPTO refuses or racecheck does not model (dsl/builtins.py)
    BUILTIN_HOST_RANKS = "builtin-host-ranks"
    BUILTIN_HOST_DTYPE = "builtin-host-dtype"
    BUILTIN_IN_CHIP = "builtin-in-chip"
    BUILTIN_NOT_WINDOW = "builtin-not-window"
    BUILTIN_SAME_WINDOW = "builtin-same-window"
    BUILTIN_SOURCE_IS_TARGET = "builtin-source-is-target"
    BUILTIN_HOST_SIGNAL = "builtin-host-signal"
    BUILTIN_MODE = "builtin-mode"
    BUILTIN_NO_SIGNAL_OFF_HOST = "builtin-no-signal-off-host"
    BUILTIN_NO_SIGNAL_AGAIN = "builtin-no-signal-again"
    BUILTIN_DEFER = "builtin-defer"
    BUILTIN_LOCAL_WINDOW = "builtin-local-window"
    BUILTIN_SUM_ONLY = "builtin-sum-only"
    BUILTIN_OUT_ON_HOST = "builtin-out-on-host"
    BUILTIN_KEYWORDS = "builtin-keywords"
    BUILTIN_COUNTS = "builtin-counts"
    # the Promela model's comments, and why SPIN's search decides nothing (export/)
    PROMELA_MODEL = "promela-model"
    PROMELA_QUESTIONS = "promela-questions"
    PROMELA_DEADLOCK = "promela-deadlock"
    PROMELA_CELL = "promela-cell"
    PROMELA_CAN_RUN = "promela-can-run"
    PROMELA_CAN_RUN_BEFORE = "promela-can-run-before"
    PROMELA_INEXPRESSIBLE = "promela-inexpressible"
    SPIN_NOT_ON_PATH = "spin-not-on-path"
    SPIN_CANNOT_RUN = "spin-cannot-run"
    SPIN_NO_TIME_LEFT = "spin-no-time-left"
    SPIN_TIMED_OUT = "spin-timed-out"
    SPIN_STEP_FAILED = "spin-step-failed"
    SPIN_NOT_EXHAUSTIVE = "spin-not-exhaustive"
    SPIN_UNEXPECTED_OUTPUT = "spin-unexpected-output"
    SPIN_UNREADABLE_OUTPUT = "spin-unreadable-output"


_ASSUME_FORMS = (
    "write `NAME in LOW..HIGH`, `NAME <= HIGH` or `NAME >= LOW`, NAME an input tensor of the"
    " host entry"
)  # an assumption's three forms, as --assume and `# racecheck: assume` both say

_WORDS: dict[ReasonCode, str] = {
    ReasonCode.REPEAT: (
        "--repeat runs the calls back to back on the same windows, never zeroed: persistent"
        " windows without PyPTO's reset between requests (PyPTO's default zeroes them between"
        " calls: --reset-windows)"
    ),
    ReasonCode.RESET_WINDOWS: (
        "--reset-windows: every call starts from zeroed windows after the previous one ended,"
        " so the calls are checked as one"
    ),
    ReasonCode.ROUNDS_JOINED: (
        "--rounds joined: the host waits for every rank to finish a call before it starts the"
        " next; the windows persist between calls"
    ),
    ReasonCode.PER_CALL: "--per-call {values}",
    ReasonCode.RESET_ASSUMED_STATE: (
        "--reset-windows checks the calls as one, but host tensor {tensor}, which the program"
        " writes, steers it: the next call starts from what this one left there, which one"
        " call's check does not cover; check the calls on persistent windows (--repeat N"
        " --rounds joined)"
    ),
    ReasonCode.SINGLE_DEVICE: (
        "runs on one device (no device= dispatch, or an L2-only program): checked at P=1"
        " whatever --ranks asks"
    ),
    ReasonCode.SINGLE_USE: (
        "signal cells end non-zero: this kernel is single-use as written;"
        " if it runs in a loop, check it with --repeat 2"
    ),
    ReasonCode.EVERY_P_REPEAT: (
        "--repeat and --per-call runs are outside the symbolic fragment (one call only)"
    ),
    ReasonCode.EVERY_P_NO_ORIGIN: "the program's origin is unknown",
    ReasonCode.EVERY_P_REJECTS_ALL: "the program rejects every P >= {low}",
    ReasonCode.EVERY_P_UNDECIDED: "z3 could not decide an obligation ({why})",
    ReasonCode.EVERY_P_REFUTED: "no proof that {obligation}: counter-model at P={world} ({where})",
    ReasonCode.EVERY_P_INT32: "at P={world}, line {line} computes `{what}` outside the INT32 range",
    ReasonCode.EVERY_P_INPUT_WRITTEN: (
        "line {line} writes {memory}, which the program also reads as an input"
    ),
    ReasonCode.EVERY_P_INPUT_WAITED: (
        "line {line} notifies {memory} with a value read from an input, and a wait reads {memory}"
    ),
    ReasonCode.EVERY_P_WINDOW_WRITER: (
        "line {line} writes {memory} other than by a Set notify or a pl.write of an INT32"
        " cell, and line {read} reads it with pl.read"
    ),
    ReasonCode.EVERY_P_WINDOW_VALUE: (
        "line {line} stores {values} into {memory}, outside the values the pl.read at"
        " line {read} was traced with"
    ),
    ReasonCode.ASSUME_LOW: "P >= {low}",
    ReasonCode.ASSUME_BELOW: (
        "P < {world} (at P={world}, line {line} computes `{what}` outside the INT32 range;"
        " the device wraps or is undefined there)"
    ),
    ReasonCode.ASSUME_ACCEPTS: "the program accepts P (else skipped: {message})",
    ReasonCode.ASSUME_MODEL: (
        "the execution model of docs/model.md: notify/wait as release/acquire, windows zeroed"
        " per call, one call (--repeat 1); the tasks of a rank, values that steer the program"
        " and writes into signal cells other than notifies are checked at the concrete P below"
    ),
    ReasonCode.ASSUME_SCOPE: (
        "proved: races, deadlocks, out-of-bounds accesses;"
        " the golden-model comparison and stale-read warnings at the concrete P below only"
    ),
    ReasonCode.ASSUME_UNCHECKED: (
        "not run concretely: the paths through line {lines}, taken only beyond"
        " P={cap} (e.g. at P={world}): their races, deadlocks and bounds are"
        " proved, their numbers unchecked"
    ),
    ReasonCode.ASSUME_DISCHARGED: "discharged for every P: {obligation}",
    ReasonCode.ASSUME_INPUTS: "every input satisfying {ranges}",
    ReasonCode.ASSUME_WINDOW_READ: (
        "pl.read of {memory} at line {line}: 0 (never written) or a value its Set notifies"
        " and pl.writes store ({values})"
    ),
    ReasonCode.HUNG_UNFOUND: (
        "the traced run hung but no engine found the deadlock; refusing to answer"
    ),
    ReasonCode.MORE_UNCHECKED: "more may be wrong in executions not checked: {why}",
    ReasonCode.WITNESS_UNREPLAYED: (
        "internal inconsistency: the {finding} witness{where} did not replay"
        " in the co-simulation; refusing to answer"
    ),
    ReasonCode.WITNESS_DIVERGED: (
        "the {finding}{where} is not shown: every order racecheck found for it changes a"
        " value the program's control flow reads, and the program then runs other events"
    ),
    ReasonCode.EXPECT_NOT_APPLICABLE: "--expect {model} does not apply at P={ranks}: {why}",
    ReasonCode.PATH_UNREALISED: "its other path could not be realised",
    ReasonCode.PATHS_BUDGET: "past the budget of {budget} paths",
    ReasonCode.PATHS_SATURATED: (
        "not explored: a bug is shown and the last {quiet} paths added no finding"
    ),
    ReasonCode.ORDERS_NOT_ENUMERATED: (
        "more than two writes, not all Sets: their orders are not enumerated"
    ),
    ReasonCode.INPUT_NOT_SYMBOLIC: "its dependence on the input has no symbolic form",
    ReasonCode.INPUTS_UNDECIDED: "the solver could not pick inputs",
    ReasonCode.OPEN_INPUT: (
        "the value used at {used} depends on input data{read}; other inputs may take another path"
    ),
    ReasonCode.OPEN_ORDER: (
        "the value used at {used} depends on the order of unordered writes"
        "{read}; other orders may take another path"
    ),
    ReasonCode.OUTSIDE_HOST_ROW: "only x[r] (one leading row) of a host tensor is followed",
    ReasonCode.OUTSIDE_TILE_VALUE: "a value read out of a tile is outside the fragment",
    ReasonCode.OUTSIDE_NOT_VIEW: "{value} is not a window or host tensor the tracer follows",
    ReasonCode.OUTSIDE_REMOTE_HOST: "a remote access to a host tensor",
    ReasonCode.OUTSIDE_NOT_TILE: "{value} is not a tile the tracer follows",
    ReasonCode.OUTSIDE_DIM_NOT_P: "the dynamic dim {dim} is not the rank count",
    ReasonCode.OUTSIDE_HOST_DIM: "the host tensor dim {dim} is outside the fragment",
    ReasonCode.OUTSIDE_NOT_PROGRAM: "{value} is not a program the tracer can enter",
    ReasonCode.OUTSIDE_NO_HOST_ENTRY: "a program class without a host entry",
    ReasonCode.OUTSIDE_NO_RANK_PARAMETER: "a factory without a rank-count parameter",
    ReasonCode.OUTSIDE_PATHS: "more than {paths} branch paths",
    ReasonCode.OUTSIDE_NO_DISPATCH_LOOP: (
        "no dispatch loop `for r in pl.range(world size)` was followed"
    ),
    ReasonCode.OUTSIDE_NOT_INTEGER: "{value} is not an integer the symbolic tracer can follow",
    ReasonCode.OUTSIDE_DIVISOR_SIGN: "division by {divisor}, which may be zero or negative",
    ReasonCode.OUTSIDE_DIVISION_CASES: "{left} // {right} has too many cases to split",
    ReasonCode.OUTSIDE_QUOTIENT: (
        "{left} {op} {right} may have a quotient outside {split}, the cases the"
        " tracer splits a division by a symbolic value into"
    ),
    ReasonCode.OUTSIDE_INT32: "{left} {op} {right} = {result} leaves the INT32 range",
    ReasonCode.OUTSIDE_COMPARISON: "comparing {left} with {right} is outside the fragment",
    ReasonCode.OUTSIDE_HASHED_VALUE: "the symbolic value {value} is hashed or used as a key",
    ReasonCode.OUTSIDE_HASHED_CONDITION: "the symbolic condition {cond} is hashed",
    ReasonCode.OUTSIDE_AS_TEXT: (
        "the symbolic value {value} is turned into text (line {line}) outside"
        " a raise statement or an assert message"
    ),
    ReasonCode.OUTSIDE_DECISIONS: (
        "more than {decisions} symbolic branches on one path"
        " (a loop whose bound is symbolic but is not a pl.range?)"
    ),
    ReasonCode.OUTSIDE_ESCAPED_INDEX: (
        "{what} at {at} uses a loop index outside its iteration"
        " (after its loop, or on another path through the loop body)"
    ),
    ReasonCode.OUTSIDE_STEP: "pl.range with step {step} is outside the fragment",
    ReasonCode.OUTSIDE_RANGE_NOT_FOR: (
        "a pl.range at {at} that is not the iterable of a for statement"
        " (a comprehension, list(), enumerate(), zip() ... would see one iteration)"
    ),
    ReasonCode.OUTSIDE_LEFT_EARLY: "a loop left early (break, return or an exception) in {name}",
    ReasonCode.OUTSIDE_PASSES: "more than {passes} paths through one loop body",
    ReasonCode.OUTSIDE_PARTLY_BOUND: (
        "the loop at {at} binds {name} on some paths through its"
        " body only, and it is read where those paths may not have run"
    ),
    ReasonCode.OUTSIDE_ZERO_TRIPS: (
        "the loop at {at} may run zero times, leaving {name} unbound where it is read"
    ),
    ReasonCode.OUTSIDE_DISPATCH_OUTSIDE_LOOP: "a dispatch outside the host loop",
    ReasonCode.OUTSIDE_NO_DISPATCH: "a per-rank operation outside a dispatch at {at}",
    ReasonCode.OUTSIDE_RAISES_IN_LOOP: "the program raises inside a loop: {message}",
    ReasonCode.OUTSIDE_RAISES_ALWAYS: "the program raises on every path: {message}",
    ReasonCode.OUTSIDE_RAISES_ON_SOME_RANKS: "the program raises on some ranks only: {message}",
    ReasonCode.OUTSIDE_NOT_BOUND: "{value} is not an integer bound",
    ReasonCode.OUTSIDE_CARRIES_CONTAINER: "the loop carries the container {name}",
    ReasonCode.OUTSIDE_CARRIES_VALUE: (
        "the loop carries {name}: set in one iteration and still bound after the loop"
    ),
    ReasonCode.OUTSIDE_CARRIES_BY_PATH: (
        "the loop carries {name}: its value after the loop depends on the path through the body"
    ),
    ReasonCode.NO_SUCH_FILE: "no such file",
    ReasonCode.UNREADABLE: "cannot read the file: {why}",
    ReasonCode.SYNTAX: "syntax error: {why}",
    ReasonCode.IMPORT_FAILED: "importing the file {how}",
    ReasonCode.RAISED: "raised {error}: {why}",
    ReasonCode.NO_PROGRAM: (
        "no program found: expected a @pl.program class with a host entry, a "
        "@pl.jit.host entry or a factory function that returns one{found}"
    ),
    ReasonCode.REJECTED_SILENTLY: "{error} at line {line}: {text}",
    ReasonCode.EXITED: (
        "called sys.exit/os._exit ({status}); racecheck cannot check a program"
        " that exits the process"
    ),
    ReasonCode.NO_HOST_ENTRY: (
        "program {name} has no host entry "
        "(@pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator))"
    ),
    ReasonCode.NOT_A_PROGRAM: (
        "{name} returned {value}, not a @pl.program class or a @pl.jit.host entry"
    ),
    ReasonCode.HOST_PARAMETER_UNBOUND: (
        "{name}: host parameter {parameter!r} has no default; pass --arg {parameter}=VALUE"
    ),
    ReasonCode.DIM_UNBOUND: (
        "{name}: dynamic dim {dim} is not the rank count; pass --arg {dim}=VALUE"
    ),
    ReasonCode.ARG_FAILED: "--arg value {text!r} is evaluated over the file's names and {how}",
    ReasonCode.RANK_PARAM_UNKNOWN: (
        "--rank-param {param}: {name}() has no parameter of that name (parameters: {parameters})"
    ),
    ReasonCode.ARG_IS_RANK_COUNT: (
        "--arg {param}: {name}() receives the rank count P through {param!r}; choose P with --ranks"
    ),
    ReasonCode.FACTORY_PARAMETER_UNBOUND: (
        "factory {name}() has a parameter {parameter!r} without a default; "
        "pass --arg {parameter}=VALUE (or --rank-param {parameter} "
        "if it is the rank count)"
    ),
    ReasonCode.L2_UNANNOTATED: (
        "{name}: parameter {parameter!r} has no type annotation; an L2-only"
        " program is checked with host tensors of its orchestration's annotated"
        " shapes"
    ),
    ReasonCode.RANK_PARAM_UNUSED: (
        "--rank-param {param}: no selected factory has a parameter of that name"
    ),
    ReasonCode.ARG_UNKNOWN: (
        "--arg {arg}: no selected program has a parameter of that name (parameters: {parameters})"
    ),
    ReasonCode.ONLY_SINGLE_CHIP: (
        " ({programs} has no host entry: nothing is dispatched to "
        "ranks, so there is no collective to check)"
    ),
    ReasonCode.NO_SUCH_PROGRAM: "--program {name}: no such program (available: {available})",
    ReasonCode.OVERTIME: "did not finish within --timeout: cut while {stage}",
    ReasonCode.OVERTIME_AT: "did not finish within --timeout: cut while {stage}, at {where} {text}",
    ReasonCode.OVERTIME_SECONDS: "did not finish within --timeout ({seconds} s): cut while {stage}",
    ReasonCode.OVERTIME_SECONDS_AT: (
        "did not finish within --timeout ({seconds} s): cut while {stage}, at {where} {text}"
    ),
    ReasonCode.WHILE_LOOP: (
        "{where}: a Python `while` in {function}: PyPTO compiles it as a device while loop;"
        " racecheck runs it as Python, as often as its condition holds at each traced P,"
        " like a pl.range of that many iterations (pl.while_ is PyPTO's documented form)"
    ),
    ReasonCode.ASSUME_EMPTY_RANGE: "--assume {text}: the range {low}..{high} is empty",
    ReasonCode.ASSUME_FLAG_SYNTAX: f"--assume {{text}}: {_ASSUME_FORMS}",
    ReasonCode.ASSUME_COMMENT_SYNTAX: (
        f"{{path}}:{{line}}: `# racecheck: assume {{text}}`: {_ASSUME_FORMS}"
    ),
    ReasonCode.ASSUME_FLAG: "--assume {text}",
    ReasonCode.ASSUME_COMMENT: "{path}:{line}: # racecheck: assume {assumption}",
    ReasonCode.ASSUME_NO_TENSOR: (
        "{origin}: {program} has no input tensor {tensor} (its host entry takes {inputs})"
    ),
    ReasonCode.USAGE_RANK_RANGE: "ranks {ranks}: rank counts must be between 1 and {most}",
    ReasonCode.USAGE_NOT_CHOICE: "{what} {value}: not a valid {what}",
    ReasonCode.USAGE_NOT_BOOL: "{name} {value}: must be true or false",
    ReasonCode.USAGE_EMPTY_NAME: "{name}: program and --arg names must be non-empty strings",
    ReasonCode.USAGE_RANK_PARAM: "--rank-param {name}: not a parameter name",
    ReasonCode.USAGE_ARGV_TYPES: "argv {argv}: the file's command line must be strings",
    ReasonCode.USAGE_ENV: "--env {text}: expected NAME=VALUE, e.g. --env MODE=fused",
    ReasonCode.USAGE_IMPORT_ROOT: "--import-root {root}: no such directory",
    ReasonCode.USAGE_ARG_IS_P: "--arg {name}: the rank-count parameter gets P; use --ranks",
    ReasonCode.USAGE_COUNT: "{name} {value}: must be a whole number of at least {minimum}",
    ReasonCode.USAGE_PER_CALL: (
        "--per-call {text}: expected NAME=EXPR, EXPR a whole-number expression"
        " (+ - * // % and parentheses) over {{call}}, the call number from 1, e.g. epoch={{call}}"
    ),
    ReasonCode.USAGE_PER_CALL_ARG: (
        "--per-call {name}: also given by --arg {name}; give a host scalar one of the two"
    ),
    ReasonCode.USAGE_PER_CALL_RESET: (
        "--per-call with --reset-windows: the calls are then checked as one, so one value per"
        " call cannot be honoured; drop --reset-windows (persistent windows: --rounds joined)"
    ),
    ReasonCode.PER_CALL_NOT_SCALAR: (
        "--per-call {name}: the host entry of {program} has no scalar parameter of that name"
        " (its scalars: {scalars})"
    ),
    ReasonCode.USAGE_SECONDS: "{name} {value}: must be a positive number of seconds",
    ReasonCode.USAGE_BOOL_TEXT: "{what}: expected a bool (true/false, yes/no, on/off, 1/0)",
    ReasonCode.USAGE_UNKNOWN_CHOICE: "unknown {what} {name}; choose one of {names}",
    ReasonCode.USAGE_EMPTY_RANGE: "ranks {ranks}: range {part} is empty; write LOW..HIGH",
    ReasonCode.USAGE_FALLBACK: "fallback goes with ranks all or an open range such as 2..",
    ReasonCode.USAGE_RANK_COUNT: (
        "ranks {ranks}: {text} is not a rank count; use e.g. 4, 2,4,8 or 2..8"
    ),
    ReasonCode.USAGE_ARG: "--arg {text}: expected NAME=VALUE, e.g. --arg mode=ring",
    ReasonCode.USAGE_ONE_FILE: "--format {format} and --html describe one file; give one FILE",
    ReasonCode.USAGE_ARGV_SPLIT: "--argv {argv}: {why}",
    ReasonCode.USAGE_UNWRITABLE: "--html {path}: cannot write there",
    ReasonCode.USAGE_TRACE_RANKS: "trace --ranks {ranks}: give one rank count, e.g. --ranks 4",
    ReasonCode.CONFIG_UNREADABLE: "cannot read it: {why}",
    ReasonCode.CONFIG_TABLE: "[tool.racecheck]",
    ReasonCode.CONFIG_FILE_TABLE: "[[tool.racecheck.files]] #{number}",
    ReasonCode.CONFIG_NOT_TABLE: "{where} must be a table",
    ReasonCode.CONFIG_FILES_NOT_TABLES: "{where} files must be [[tool.racecheck.files]] tables",
    ReasonCode.CONFIG_NO_PATH: (
        '{where} needs path = "GLOB" (or a list of globs), relative to {source}'
    ),
    ReasonCode.CONFIG_UNKNOWN_KEY: "{where} unknown key {key!r}; known keys: {known}",
    ReasonCode.CONFIG_IN_TABLE: "{where}: {why}",
    ReasonCode.CONFIG_WRONG_VALUE: "{what} = {value}: expected {expected}",
    ReasonCode.CONFIG_EXPECTED_RANKS: 'a rank-count text ("2..8", "all") or a list of rank counts',
    ReasonCode.CONFIG_EXPECTED_ARGS: "a table of NAME = VALUE",
    ReasonCode.CONFIG_EXPECTED_TEXTS: 'a table of NAME = "VALUE"',
    ReasonCode.CONFIG_EXPECTED_STRINGS: "a list of strings",
    ReasonCode.CONFIG_EXPECTED_BOOL: "true or false",
    ReasonCode.CONFIG_EXPECTED_STRING: "a string",
    ReasonCode.CONFIG_BAD_EXPECT: "{what} = {name!r}: {why}",
    ReasonCode.CONFIG_NO_GOLDEN: "{what} = {name!r}: no such file {golden}",
    ReasonCode.CONFIG_UNMATCHED: "[[tool.racecheck.files]] #{number} path {pattern!r}",
    ReasonCode.CONFIG_MATCHES_NO_FILE: "{table} matches no file",
    ReasonCode.GOLDEN_NOT_FUNCTION: "golden {name!r}: write file.py:function or module:function",
    ReasonCode.GOLDEN_UNKNOWN: "unknown golden model {name!r}; valid models: {names}",
    ReasonCode.FILE_GOLDEN_TOO_LARGE: (
        "the file's golden {name} was not run: its tensors take {gib} GiB materialised"
        " (racecheck runs a golden on at most {limit} GiB)"
    ),
    ReasonCode.FILE_GOLDEN_NO_PARAMETER: (
        "the file's golden {name} was not run: {tensor} is no parameter of the entry"
    ),
    ReasonCode.FILE_GOLDEN_SHAPE: (
        "the file's golden {name} was not run: its test states {tensor} as {stated}, this P"
        " runs it as {shape}"
    ),
    ReasonCode.FILE_GOLDEN_RAISED: "the file's golden {name} raised {error}: {message}",
    ReasonCode.FILE_GOLDEN_OTHER_SHAPE: "the file's golden {name} gives {tensor} another shape",
    ReasonCode.FILE_GOLDEN_MATCHES: (
        "the output {tensor} matches the file's golden {name} (rtol={rtol}, atol={atol})"
    ),
    ReasonCode.FILE_GOLDEN_DIFFERS: (
        "the output {tensor} differs from the file's golden {name} at {index}: got {got},"
        " golden {golden} ({outside} of {size} elements outside rtol={rtol}, atol={atol};"
        " racecheck's tile math approximates the hardware's, so this is not judged)"
    ),
    ReasonCode.GOLDEN_LEADING_DIM: "{model}: golden has leading dimension {dim}, expected {ranks}",
    ReasonCode.GOLDEN_ROW_BLOCKS: "a row of {width} elements does not split into {ranks} blocks",
    ReasonCode.GOLDEN_ROOT_OUTSIDE: "root {root} is not a rank of {ranks}",
    ReasonCode.GOLDEN_UNKNOWN_DTYPE: "unknown dtype {dtype}; known: {known}",
    ReasonCode.GOLDEN_TIMES: "times must be at least 1, got {times}",
    ReasonCode.GOLDEN_CANNOT_REPEAT: "{model} changes the data's size; it cannot repeat",
    ReasonCode.GOLDEN_NO_FUNCTION: "golden {spec}: {where} defines no function {function}",
    ReasonCode.GOLDEN_RAISED: "golden {spec} raised {error}: {message}",
    ReasonCode.GOLDEN_NO_FILE: "golden {spec}: no such file {path}",
    ReasonCode.GOLDEN_CANNOT_IMPORT: "golden {spec}: cannot import {path}",
    ReasonCode.GOLDEN_IMPORT_FAILED: "golden {spec}: importing {source} failed: {why}",
    ReasonCode.HELP_PYTEST_RACECHECK: (
        "also check the collectives [tool.racecheck] in pyproject.toml names"
    ),
    ReasonCode.PYTEST_NO_CONFIG: (
        "--racecheck: no [tool.racecheck] in the pyproject.toml at or above {root}"
    ),
    ReasonCode.FILE_GOLDEN_NEEDS_TORCH: (
        "the file's golden {name} was not run: it computes with torch, which is not"
        " installed (install torch to compare the outputs with it)"
    ),
    ReasonCode.FILE_INPUTS_USED: (
        "racecheck ran the file's test up to its harness call at {where}: the scalars,"
        " dynamic dims and input tensors it states are used (a tensor over 8 MiB starts as"
        " zeros)"
    ),
    ReasonCode.FILE_INPUTS_USED_WITHOUT_TORCH: (
        "racecheck ran the file's test up to its harness call at {where}: the scalars,"
        " dynamic dims and input tensors it states are used, but torch is not installed:"
        " a tensor its specs compute with torch is drawn by --seed (install torch to use"
        " the file's own)"
    ),
    ReasonCode.FILE_INPUTS_NOT_REACHED: (
        "the file's test code did not reach its harness call for {entry}: {why}; its"
        " inputs are drawn by --seed and no golden of the file's is checked"
    ),
    ReasonCode.FILE_INPUTS_NEED_TORCH: (
        "the file states its inputs and golden ({stated} at {where}) with torch, which is"
        " not installed: inputs are drawn by --seed and no golden of the file's is checked"
        " (install torch to compute them)"
    ),
    ReasonCode.FILE_INPUTS_NOT_RUN: (
        "the file states its inputs and golden ({stated} at {where}); racecheck does not"
        " run the file's test code: inputs are drawn by --seed and no golden of the file's"
        " is checked"
    ),
    ReasonCode.SHADOW_SCALAR_ARITHMETIC: "scalar arithmetic through pl.* is outside the fragment",
    ReasonCode.SHADOW_DISPATCH_LOOPS: "more than one dispatch loop per rank",
    ReasonCode.SHADOW_DEVICE_NOT_INDEX: (
        "a dispatch whose device= is not the index of one host loop"
    ),
    ReasonCode.SHADOW_DISPATCH_START: (
        "a dispatch loop that does not start at 0 with step 1: its windows' group"
        " depends on whether its stop is pld.world_size() or a number"
    ),
    ReasonCode.SHADOW_TWO_KERNELS: (
        "two kernel tasks per rank: the runtime may overlap them (docs/model.md)"
    ),
    ReasonCode.SHADOW_DEFERRED_ALLGATHER: (
        "pld.tensor.allgather(defer=True) waits unsigned (docs/model.md)"
    ),
    ReasonCode.SHADOW_FOUR_ARGUMENTS: "the four-argument {label} is outside the fragment",
    ReasonCode.SHADOW_SOURCE_IS_TARGET: "{label}: its source and target are views of one buffer",
    ReasonCode.SHADOW_HOST_KERNEL_CAP: (
        "{label} at line {line} runs PyPTO's host kernel, which returns at once above"
        " {most} ranks (python/pypto/runtime/builtins/collectives/all_to_all_v/templates/"
        "kernel.cpp.in: kMaxSupportedRanks): no proof can hold for every P"
    ),
    ReasonCode.SHADOW_BLOCK_SIZE: (
        "pld.tensor.all_to_all_v's block of {dim} // {divisor} rows is not one number at every P"
    ),
    ReasonCode.SHADOW_RANGE_CARRY: (
        "pl.range with init_values (a loop carry) is outside the fragment"
    ),
    ReasonCode.SHADOW_RANGE_ARGS: "pl.range{args} is outside the fragment",
    ReasonCode.SHADOW_SYMBOLIC_STEP: "pl.range with a symbolic step is outside the fragment",
    ReasonCode.SHADOW_ALLOC_NO_DTYPE: "alloc_window_buffer(shape) without dtype",
    ReasonCode.SHADOW_ALLOC_INSIDE: "a window buffer allocated inside a loop or a kernel",
    ReasonCode.SHADOW_WINDOW_OF: "pld.window of something that is not a window buffer",
    ReasonCode.SHADOW_ACCESS_RANK: "an access whose rank differs from its view's",
    ReasonCode.SHADOW_ACCESS_TO: "an access to {view}, which is not a window or host tensor",
    ReasonCode.SHADOW_NOTIFY_OP: "notify op {op}",
    ReasonCode.SHADOW_WAIT_ARGUMENTS: "pld.system.wait without offsets= or expected=",
    ReasonCode.SHADOW_WAIT_CMP: "wait cmp {cmp}",
    ReasonCode.SHADOW_WHOLE_SLICE_SIZES: (
        "a whole-slice {label} whose src and dst sizes differ for some P"
    ),
    ReasonCode.SHADOW_REMOTE_NOT_WINDOW: "put/get whose remote side is not a window",
    ReasonCode.SHADOW_REGION_SIZES: "{label}: its source and target regions differ in size",
    ReasonCode.SHADOW_NAME: "{name} is outside the symbolic fragment",
    ReasonCode.SHADOW_READ_NOT_INPUT: (
        "pl.read of {memory}, which is not an input tensor, is outside the symbolic fragment"
    ),
    ReasonCode.SHADOW_READ_DTYPE: (
        "pl.read of {memory}, whose {dtype} values may leave INT32, is outside the symbolic"
        " fragment"
    ),
    ReasonCode.SHADOW_CAST: "pl.cast of a scalar to {dtype} is outside the symbolic fragment",
    ReasonCode.OUTSIDE_INPUT_SYNC: (
        "a value read from an input steers a {effect} at {at}, which is outside the symbolic"
        " fragment"
    ),
    ReasonCode.OBLIGATION_BOUNDS: "every access in bounds",
    ReasonCode.OBLIGATION_UNIQUE_WRITER: (
        "each waited signal cell is fed by one notify, or by one +1 from every other rank"
        " with the wait at N - 1"
    ),
    ReasonCode.OBLIGATION_WAIT_VALUE: "each wait passes exactly when its cell's notify has landed",
    ReasonCode.OBLIGATION_NOTIFY_EXISTS: (
        "every wait's cell is notified (no wait without its notify)"
    ),
    ReasonCode.OBLIGATION_NO_CIRCULAR_WAIT: (
        "no circular wait (the notify a wait needs is behind earlier waits only)"
    ),
    ReasonCode.OBLIGATION_ORDERED: (
        "conflicting accesses of different ranks ordered by access → notify ⇒ wait → access"
    ),
    ReasonCode.OBLIGATION_PARALLEL: (
        "no two iterations of a kernel's pl.parallel loop conflict, or signal while the other"
        " accesses memory (PyPTO may run them concurrently)"
    ),
    ReasonCode.EVERY_P_DEFER_WAIT: "a defer_wait compares unsigned",
    ReasonCode.EVERY_P_SIGNAL_STORE: (
        "a store into signal window {memory} (line {line}) besides its notifies"
    ),
    ReasonCode.EVERY_P_SET_ADD: "Set and AtomicAdd notifies on one signal window ({memory})",
    ReasonCode.RANK_ALONE: "rank {rank}",
    ReasonCode.THREAD_OF_RANK: "rank {rank}, {thread}",
    ReasonCode.THREAD_ON_RANK: "{thread} on rank {rank}",
    ReasonCode.CELL_TASK_END: "the end of {task}",
    ReasonCode.CELL_HOST_JOIN: "the host's join after call {call} (every rank ends it)",
    ReasonCode.UNIT_DISPATCH_START: "the start of dispatch {dispatch} on rank {rank}",
    ReasonCode.UNIT_DISPATCH_LOCK: "the dispatch lock of rank {rank}",
    ReasonCode.UNIT_FREE: "a free {unit} of rank {rank} (it has {units})",
    ReasonCode.HOLDERS_SHARING: "{thread} ({count} threads)",
    ReasonCode.HOLDERS_ONE_MORE: "1 more thread",
    ReasonCode.HOLDERS_MORE: "{count} more threads",
    ReasonCode.HELD_BY: ", held by {holders}",
    ReasonCode.ENGINE_NONE_EXACT: "no engine can decide this program: {why}",
    ReasonCode.ENGINE_CANNOT: "the {engine} engine cannot decide this program: {why}",
    ReasonCode.ENGINE_NONE: "no engine can decide this program",
    ReasonCode.CELL_INEXACT: (
        "a write into signal cell {cell} that no engine models exactly ({label}) at {where}"
    ),
    ReasonCode.CELL_UNITS: (
        "threads share {cell} and only the explore and smt engines decide which ready thread"
        " gets it"
    ),
    ReasonCode.MONOTONE_EQ_WAIT: "an Eq wait at {where}",
    ReasonCode.MONOTONE_NEGATIVE_SET: "a negative Set at {where}",
    ReasonCode.MONOTONE_NEGATIVE_ADD: "a negative Add on a cell another thread waits on at {where}",
    ReasonCode.MONOTONE_MIXED_SET: "a Set on a cell also written otherwise at {where}",
    ReasonCode.MONOTONE_WRAP: "signal cell {cell} can wrap at 32 bits",
    ReasonCode.MONOTONE_UNSIGNED_NEGATIVE: (
        "an unsigned wait on a cell that can go negative at {where}"
    ),
    ReasonCode.EXPLORE_MACRO_STATES: "explore: more than {states} macro states",
    ReasonCode.EXPLORE_POR_STEPS: (
        "explore: more than {states} steps of the partial-order-reduced search"
    ),
    ReasonCode.SMT_UNDECIDED: "smt: z3 could not decide {about} ({why})",
    ReasonCode.SMT_ASKS_RUN: "whether {event} can run",
    ReasonCode.SMT_ASKS_BEFORE: "{asks} before {blocker}",
    ReasonCode.SMT_ASKS_DEADLOCK: "whether the ranks can deadlock",
    ReasonCode.SMT_EVENT: "rank {rank}'s event at line {line} ({text})",
    ReasonCode.SMT_NO_EXECUTION: "no execution runs {first} without {second}",
    ReasonCode.SMT_NOT_A_WITNESS: "decoded witness for {first} before {second} is not one",
    ReasonCode.SMT_MODEL_NOT_RUN: "z3 model does not run {first} without {second}",
    ReasonCode.SMT_NOT_STUCK: "decoded stuck state does not replay to a stuck state",
    ReasonCode.Z3_BUDGET: "z3 used up its budget of {units:,} resource units",
    ReasonCode.STAGE_BOUNDING: "bounding the signal cells' values before asking z3",
    ReasonCode.STAGE_ANALYSIS_ORDERS: "the analysis asked which events can run before which",
    ReasonCode.STAGE_ANALYSIS_EVENT: (
        "the analysis asked which events can run before which (whether rank {rank}'s event can run)"
    ),
    ReasonCode.STAGE_ANALYSIS_PAIR: (
        "the analysis asked which events can run before which (whether rank {rank}'s event"
        " can run before rank {other}'s event at line {line})"
    ),
    ReasonCode.STAGE_EXPLORE: "the explore engine searched the ranks' interleavings",
    ReasonCode.STAGE_MONOTONE: "the monotone engine computed which events can run before which",
    ReasonCode.STAGE_MONOTONE_HOLDING: (
        "the monotone engine computed which events can run before which (holding rank {rank} back)"
    ),
    ReasonCode.STAGE_SMT_ENCODING: "the smt engine encoded the trace for z3",
    ReasonCode.STAGE_SMT_STUCK: (
        "the smt engine encoded the trace for z3 (whether rank {rank} can be stuck)"
    ),
    ReasonCode.STAGE_SMT_RANK: "the smt engine encoded the trace for z3 (rank {rank})",
    ReasonCode.STAGE_SMT_WAIT: "the smt engine encoded the trace for z3 (rank {rank}'s wait)",
    ReasonCode.STAGE_SMT_ASKED: "the smt engine asked z3 {about}",
    ReasonCode.EXPLORE_NO_WITNESS: "{first} cannot precede {second}: no witness",
    ReasonCode.STAGE_CHOOSING_INPUTS: "choosing inputs that take a branch's other side",
    ReasonCode.HOST_ROW_OUTSIDE: "row {row} of {view} is outside [0, {rows})",
    ReasonCode.DISPATCH_DEVICE_OUTSIDE: (
        "the program dispatches to device {rank} but runs on {ranks} ranks"
    ),
    ReasonCode.HOST_ROWS: (
        "host tensor {name} has {rows} rows; the program is written for {rows} ranks"
    ),
    ReasonCode.DEFER_WAIT_THEN_ACCESS: (
        "{label} after pld.system.defer_wait at line {line} in the same task: PyPTO retires"
        " that task at once, so nothing orders this access after the wait; move it to a task"
        " that depends on it (docs/model.md)"
    ),
    ReasonCode.SPLIT_AIV_IN_PLACE: (
        "pl.split_aiv here: racecheck runs AIV sub-lanes as threads of a kernel call, a"
        " pl.at region or pl.spmd block whose source it can outline, or a dispatched"
        " kernel, not in a task it runs in place or in a per-device function's own code"
        " (docs/model.md)"
    ),
    ReasonCode.SPLIT_AIV_OUTSIDE: (
        "line {line} ({label}) is outside every pl.split_aiv region of its kernel, whose AIV"
        " sub-lanes are threads: PyPTO leaves undefined whether the second AIV sub-lane"
        " repeats it, and racecheck runs it once, on sub-lane 0 (docs/model.md)"
    ),
    ReasonCode.PEER_OUTSIDE: "peer {owner} is outside [0, {ranks}) accessing {view}",
    ReasonCode.SIGNAL_NOT_INT32: "signal {view} must be INT32",
    ReasonCode.EVENT_BUDGET: (
        "rank {rank} exceeded the budget of {events} events; last line reached: {where} {text}"
    ),
    ReasonCode.STAGE_HOST_ENTRY: "{stage} (the host entry of {program})",
    ReasonCode.HOST_ENTRY_OVERRUN: "the host entry of {program} {overrun}",
    ReasonCode.TRACING_OVERTIME: "tracing {program} did not finish within --timeout ({who})",
    ReasonCode.TRACING_OVERTIME_AT: (
        "tracing {program} did not finish within --timeout ({who}; last line reached: {where}"
        " {text})"
    ),
    ReasonCode.HOST_TENSOR_CROSSING: (
        "rank {rank} {verb} bytes of host tensor {tensor} (line {line}) that rank {writer}"
        " {writes} (line {write_line}): PyPTO copies a dispatch's host tensors to the device"
        " before it runs and back after it, so {outcome} depends on when the two dispatches"
        " start and end, which racecheck does not model"
    ),
    ReasonCode.CROSSING_READ: "what the read sees",
    ReasonCode.CROSSING_WRITE: "which write the tensor keeps",
    ReasonCode.SUMMARY_NOT_EVERY_INPUT: (
        "one run with every iteration does not stand for every input: {why}"
    ),
    ReasonCode.SUMMARY_UNDECIDED: "that run shows a finding or is undecided itself",
    ReasonCode.STAGE_OTHER_PATHS: "exploring the program's other paths ({checked} checked)",
    ReasonCode.STAGE_BUILDING: "building {program} for P={ranks}",
    ReasonCode.BUILDING_OVERRUN: "building {program} {overrun}",
    ReasonCode.STAGE_CARRIED_STATE: "looking for host state that steers the next call",
    ReasonCode.STAGE_RACE_SEARCH: "the analysis searched for races",
    ReasonCode.STAGE_PATH_REPLAY: "replaying a witness on this path",
    ReasonCode.STAGE_WITNESS_REPLAY: "replaying the witness of a {kind}",
    ReasonCode.STAGE_INTERLEAVED: "running the ranks interleaved, for the golden model",
    ReasonCode.GATE_NO_MODEL: (
        "the outputs match no golden model, and require_model is set: name the model the"
        " outputs must match with --expect (or expect in [tool.racecheck])"
    ),
    ReasonCode.GATE_NOT_EVERY_P: (
        "not proved for every P, and require_every_p is set: the concrete P checked instead"
        " do not stand for the others"
    ),
    ReasonCode.FINDING_DATA_RACE: "data race",
    ReasonCode.FINDING_DEADLOCK: "deadlock",
    ReasonCode.FINDING_OUT_OF_BOUNDS: "out-of-bounds access",
    ReasonCode.FINDING_STALE_READ: "stale read",
    ReasonCode.FINDING_WRONG_RESULT: "wrong result",
    ReasonCode.RULE_RACE_RAW: "data race: a read can miss the write it was meant to see",
    ReasonCode.RULE_RACE_WAR: "data race: a write can clobber data before it is read",
    ReasonCode.RULE_RACE_WAW: "data race: two writes in either order",
    ReasonCode.RULE_SET_ADD_MIX: "signal cell both Set and atomically added",
    ReasonCode.RULE_STALE_READ: "stale read of never-written window bytes",
    ReasonCode.STEP_OF_FINDING: "the finding is about this step",
    ReasonCode.STEP_RACING: "racing access",
    ReasonCode.STEP_BLOCKED: "blocked forever",
    ReasonCode.STEP_UNWRITTEN: "reads memory nothing wrote",
    ReasonCode.INTERRUPTED: "racecheck: interrupted (Ctrl-C); nothing was proved",
    ReasonCode.INTERNAL_ERROR: (
        "racecheck: internal error: {error}: {message} (nothing was proved; run again with"
        " --debug for the traceback)"
    ),
    ReasonCode.EXPORT_ONE_PROGRAM: (
        "export writes one program's model, and {path} has {count} ({names}); choose one with"
        " --program NAME"
    ),
    ReasonCode.EXPORT_REJECTED: "{program} rejects {ranks} ranks ({why}); nothing to export",
    ReasonCode.EXPORT_HEADER: "{program} from {path}, P={ranks}, repeat={repeat}",
    ReasonCode.CLI_VERSION: "racecheck {version}",
    ReasonCode.CLI_PROGRESS: "racecheck: checking {program} at P={ranks}...",
    ReasonCode.CLI_SKIPPED: "racecheck: skipped {path}: {why}",
    ReasonCode.TRACE_SKIPPED: "{program}  P={ranks}  skipped  {why}",
    ReasonCode.HELP_DESCRIPTION: (
        "Model checker and race detector for PyPTO distributed collectives."
    ),
    ReasonCode.HELP_VERSION: "print racecheck's version and exit",
    ReasonCode.HELP_VERIFY: "prove a collective correct or show its bug",
    ReasonCode.HELP_VERIFY_DESCRIPTION: (
        "Flags override the file's [tool.racecheck] settings in the nearest pyproject.toml"
        " (docs/ci.md); the defaults shown apply where neither says."
    ),
    ReasonCode.HELP_RANKS: "rank counts: 4, 2,4,8, 2..8, or all / 2.. (every P) (default: 2..8)",
    ReasonCode.HELP_FALLBACK: "with --ranks all: the range checked if no proof (default: 2..8)",
    ReasonCode.HELP_REQUIRE_EVERY_P: (
        "with --ranks all: a fallback to the concrete range is unknown, exit 2 (default: off)"
    ),
    ReasonCode.HELP_ENGINE: "the engine that orders events (default: auto)",
    ReasonCode.HELP_EXPECT: "golden model, e.g. allreduce-sum (default: report the matching model)",
    ReasonCode.HELP_REQUIRE_MODEL: (
        "a proved P whose outputs match no golden model is unknown, exit 2 (default: off)"
    ),
    ReasonCode.HELP_TIMEOUT: (
        "seconds per program and P (default: none: the work budgets end every run)"
    ),
    ReasonCode.HELP_ASSUME: (
        "a precondition on an input tensor's elements: 'NAME in LOW..HIGH', 'NAME <= HIGH'"
        " or 'NAME >= LOW' (repeatable); inputs outside it are not checked (default: none)"
    ),
    ReasonCode.HELP_JOBS: (
        "worker processes for each file's (program, P) units (default: the machine's cores)"
    ),
    ReasonCode.HELP_DEFAULT: "(default: {default})",
    ReasonCode.HELP_HTML: "also write a self-contained HTML report (default: none)",
    ReasonCode.HELP_NO_COLOR: "never colour the text report (default: colour on a terminal)",
    ReasonCode.HELP_RESET_WINDOWS: (
        "with --repeat N: zero the windows between calls, as PyPTO does by default (default: off)"
    ),
    ReasonCode.HELP_ROUNDS: (
        "with --repeat N: 'free', each rank starts its next call as soon as it ends the"
        " last; 'joined', the host waits for every rank between calls, as serving does; the"
        " windows persist either way (default: free)"
    ),
    ReasonCode.HELP_PER_CALL: (
        "host scalar NAME gets EXPR at each call, {{call}} being the call number from 1"
        " (--per-call epoch={{call}}); repeatable (default: none)"
    ),
    ReasonCode.HELP_SKIP_NO_PROGRAM: (
        "a FILE that defines no program (an __init__.py, a helper module) is skipped rather"
        " than an error, as the pre-commit hook does (default: off)"
    ),
    ReasonCode.HELP_NO_CONFIG: "ignore [tool.racecheck] in pyproject.toml (default: read it)",
    ReasonCode.HELP_RUNTIME_ORDER: (
        "which dependencies PyPTO tracks between a rank's tasks: today's, or those before"
        " #1683 (remote_store/put/get/notify targets not counted as written) (default:"
        " current)"
    ),
    ReasonCode.HELP_TRACE: "print each rank's co-simulated events",
    ReasonCode.HELP_ONE_RANK_COUNT: "one rank count (required)",
    ReasonCode.HELP_EXPORT: "write the traced protocol as a Promela model",
    ReasonCode.HELP_FILE: "the Python file that holds the collective",
    ReasonCode.HELP_PROGRAM: (
        "check only this program, repeatable (default: every program of the file)"
    ),
    ReasonCode.HELP_ARG: (
        "set a factory or entry parameter; VALUE is a Python literal, else an expression"
        " over the file's names (e.g. 'shape=make_shape(2, 64)'), else a string; repeatable"
        " (default: the parameters' own defaults)"
    ),
    ReasonCode.HELP_RANK_PARAM: (
        "the factory parameter that receives P (default: found from its name)"
    ),
    ReasonCode.HELP_REPEAT: (
        "N back-to-back calls on the same windows, never zeroed in between: persistent"
        " windows without PyPTO's reset between requests (add --reset-windows for its"
        " default) (default: 1)"
    ),
    ReasonCode.HELP_SEED: "the random input values (default: 0)",
    ReasonCode.HELP_CORES: (
        "the cores of each rank: a running task, block or lane holds one, a spinning wait"
        " keeps it (default: {cores}, the A2/A3 simulator's AIV cores)"
    ),
    ReasonCode.HELP_ARGV: (
        "the file's own command line while it is imported (sys.argv[1:], split as a shell"
        " does); {{P}} is the rank count, and the file is imported afresh at each P (default:"
        " none)"
    ),
    ReasonCode.HELP_ENV: (
        "an environment variable while the file is imported; {{P}} is the rank count"
        " (repeatable; default: none)"
    ),
    ReasonCode.HELP_IMPORT_ROOT: (
        "the directory the file's absolute imports resolve against (default: the nearest"
        " parent holding pyproject.toml or .git)"
    ),
    ReasonCode.HELP_DEBUG: "show tracebacks (default: off)",
    ReasonCode.DSL_WORLD_SIZE_OUTSIDE: "pld.world_size() is only known while a program runs",
    ReasonCode.DSL_ALLOC_NO_DTYPE: "pld.alloc_window_buffer(shape, dtype=...) needs a dtype",
    ReasonCode.DSL_WINDOW_NOT_BUFFER: (
        "pld.window needs a buffer from pld.alloc_window_buffer, got {buffer}"
    ),
    ReasonCode.DSL_NOT_WINDOW: "{construct}: {role} must be a window (pld.window), got {view}",
    ReasonCode.DSL_NOT_CHOICE: "{construct}: {keyword}= must be one of {choices}, got {value}",
    ReasonCode.DSL_WAIT_ARGUMENTS: "{label} needs offsets= and expected=",
    ReasonCode.DSL_DEFER_WAIT_GE: "pld.system.defer_wait supports cmp=pld.WaitCmp.Ge only",
    ReasonCode.DSL_ATOMIC: "{label}: atomic= must be pld.AtomicType.None_ or Add, got {atomic}",
    ReasonCode.DSL_SLICE_TOGETHER: (
        "{label}: dst_offsets, src_offsets and shape are given together or not at all"
    ),
    ReasonCode.DSL_WHOLE_SLICE_SIZES: (
        "{label} of a whole slice needs src and dst of the same size, got {src} and {dst}"
    ),
    ReasonCode.DSL_NOT_RECOMPILED: (
        "racecheck could not recompile {name}() from its source (made by exec, or wrapped by"
        " another decorator), and its `%`, `//` or `divmod` would floor where the device"
        " truncates: define it with `def` in the file, under the pl decorator only"
    ),
    ReasonCode.DSL_NO_DEVICE: (
        "the host calls {name}() without device=r; racecheck models per-device calls"
        " dispatched with device="
    ),
    ReasonCode.DSL_SUB_WORKER_WRITES: (
        "{name} is a host sub-worker callback that writes {written}; racecheck does not run"
        " sub-workers"
    ),
    ReasonCode.DSL_SUB_WORKER_READS: (
        "{name} is a host sub-worker callback that only reads host tensors: not run (it cannot"
        " change what the devices compute)"
    ),
    ReasonCode.DSL_SUBMIT_KERNEL: "pl.submit takes a kernel written self.<kernel>; got {kernel}",
    ReasonCode.DSL_SUBMIT_PREDICATE: "pl.submit(predicate=...) is not modelled",
    ReasonCode.DSL_NOT_RUN: (
        "running or compiling {name} for hardware is not modelled; racecheck traces it itself"
    ),
    ReasonCode.DSL_NO_JIT_FUNCTION: "self.{name}: this module has no @pl.jit function {name!r}",
    ReasonCode.SORT_NOT_TILE: "{construct} needs a tile or a tensor, got {value}",
    ReasonCode.SORT_PAIRS_DTYPE: "{construct} of {dtype}: only FP32 (value, index) pairs",
    ReasonCode.SORT_PARTLY_VALID: "{construct} of a partly valid tile {tile} is not modelled",
    ReasonCode.SORT32_DTYPE: "pl.sort32 of {dtype}: only FP32 values are modelled",
    ReasonCode.SORT32_SHAPES: (
        "pl.sort32: values {values} and indices {indices} must have one shape, its last dim"
        " a multiple of {block}"
    ),
    ReasonCode.MRGSORT_BLOCK_LEN: (
        "pl.mrgsort(block_len={length}) of a row of {width} slots: runs of pairs that divide"
        " the row"
    ),
    ReasonCode.MRGSORT_ONE_SOURCE: "pl.mrgsort(block_len=...) takes one source",
    ReasonCode.MRGSORT_ROWS: "pl.mrgsort merges 2 to 4 sorted rows, got {count}",
    ReasonCode.MRGSORT_EXHAUSTED: "pl.mrgsort(exhausted=True) is not modelled",
    ReasonCode.MRGSORT_SHAPES: "pl.mrgsort: the merged rows must be 2-D tiles with one row count",
    ReasonCode.GATHER_MASK: "pl.gather(mask_pattern={mask_pattern}): a pl.tile.MaskPattern",
    ReasonCode.GATHER_MASK_ROWS: "pl.gather({mask}) of {source}: whole rows of {stride}",
    ReasonCode.GATHER_OUTPUT_DTYPE: "pl.gather output_dtype {kind}: same size as {dtype}",
    ReasonCode.SCATTER_BOTH_FORMS: "pl.tensor.scatter: the index form or the mask form, not both",
    ReasonCode.SCATTER_INDEX_FORM: (
        "pl.tensor.scatter: rank-2 tensors with dim=-1 and index shaped as src"
    ),
    ReasonCode.SCATTER_INDEX_OUTSIDE: "pl.tensor.scatter: an index outside {columns} columns",
    ReasonCode.SCATTER_MASK: "pl.tensor.scatter(mask_pattern={mask_pattern}): a MaskPattern",
    ReasonCode.SCATTER_MASK_COLUMNS: (
        "pl.tensor.scatter({mask}) of {source} into {target}: dst has {stride} times its columns"
    ),
    ReasonCode.CMP_TYPE: "pl.cmp cmp_type {kind}: 0 to {last}",
    ReasonCode.CONCAT_SHAPES: "pl.concat of {left} and {right}: one row count and dtype",
    ReasonCode.CONCAT_PARTLY_VALID: "pl.concat after a partly valid {left} is not modelled",
    ReasonCode.VIEW_ROW_OUTSIDE: "row {row} of {tensor} with shape {shape}",
    ReasonCode.VIEW_NOT_CONTIGUOUS: (
        "{view}[{index}] is not one contiguous block; racecheck models views without"
        " strides: pass the whole tensor and use offsets"
    ),
    ReasonCode.VIEW_SLICE_STEP: "a slice with step {step} of {view}",
    ReasonCode.VIEW_SLICE_OUTSIDE: "slice {start}:{stop} of {view} in dim {axis}",
    ReasonCode.VIEW_INDEX_OUTSIDE: "index {position} of {view} in dim {axis}",
    ReasonCode.TILE_SLICE_STEP: "tile slice {index}: slices of step 1 only",
    ReasonCode.TILE_SLICE_OUTSIDE: "tile slice {index} of a {shape} tile",
    ReasonCode.REGION_DIMS: (
        "offsets {offsets} / shape {shape} do not match the {dims} dims of {view}"
    ),
    ReasonCode.REGION_EXCEEDS: (
        "region offsets {offsets} shape {shape} exceeds {view} in dim {axis}"
    ),
    ReasonCode.REGION_PAST_BUFFER: (
        "view {view} needs bytes {start}..{end} but its buffer has {size} bytes"
    ),
    ReasonCode.TILE_MATH_NOT_TILE: "{construct} needs a tile or a tensor, got {value}",
    ReasonCode.TILE_VALIDSHAPE_PAST: "pl.set_validshape({rows}, {cols}) past the tile's {shape}",
    ReasonCode.TILE_FILLPAD_VALUE: (
        "pl.fillpad pad_value {pad_value}: zero, max, min, 0, inf or -inf"
    ),
    ReasonCode.TILE_GATHER_FORM: "pl.gather: only the index form (dim=-1, index=...) is modelled",
    ReasonCode.TILE_GATHER_AXIS: "pl.gather(dim={axis}): PyPTO gathers along the last axis only",
    ReasonCode.TILE_GATHER_INDEX: "pl.gather: an index past the {columns} columns of {tile}",
    ReasonCode.TILE_ARANGE_SHAPE: "pl.arange of shape {shape}: PyPTO fills one row, [1, n]",
    ReasonCode.TILE_GATHER_ROW: "pl.gather_row: a {shape} block at {at} of {acc}",
    ReasonCode.TILE_NEEDS_DTYPE: "{construct} needs a dtype such as pl.FP32, got {value}",
    ReasonCode.TILE_MANUAL_DEP_OUTSIDE: (
        "pl.create_tensor(manual_dep=True) outside a per-device function is not modelled:"
        " manual_dep opts a tensor out of the dependencies between tasks (docs/model.md)"
    ),
    ReasonCode.TILE_INIT_VALUE: (
        "pl.create_tensor(init_value={init_value}): a Python number is filled"
    ),
    ReasonCode.TILE_INIT_VALUE_DTYPE: (
        "pl.create_tensor(init_value={init_value}) of a {dtype} tensor is rejected by PyPTO:"
        " only init_value=0 fills 16-bit floats"
    ),
    ReasonCode.TILE_RESHAPE_COUNT: "pl.reshape of {tile} to {shape}: the element count changes",
    ReasonCode.TILE_DIM_NOT_TENSOR: "pl.tensor.dim takes a tensor, got {tensor}",
    ReasonCode.TILE_NEEDS_TILE: "{construct} needs a tile, got {value}",
    ReasonCode.TILE_RESHAPE_VALID: (
        "pl.reshape of a tile valid in {valid} of {shape}: its valid cells are no row-major prefix"
    ),
    ReasonCode.TILE_RESHAPE_REGION: "pl.reshape to {shape}: no region of it holds the valid cells",
    ReasonCode.TILE_ASSEMBLE_ATOMIC: "pl.assemble: atomic= must be a pld.AtomicType, got {atomic}",
    ReasonCode.TYPE_DYNAMIC_DIM: (
        "{dim} is a pl.dynamic dim: its value is known only inside a running program"
    ),
    ReasonCode.TYPE_TENSOR_ARGUMENTS: "{kind}[...] takes [dims], dtype; got {spec}",
    ReasonCode.TYPE_NEEDS_DTYPE: "{kind}[...] needs a dtype such as pl.FP32, got {dtype}",
    ReasonCode.TYPE_ARRAY_ARGUMENTS: "pl.Array takes [extent, dtype]",
    ReasonCode.GROUP_RANGE: (
        "device=r over a pl.range whose stop is neither pld.world_size() nor a constant, or"
        " a constant stop with a start that is not a constant or a step other than 1: PyPTO"
        " reads no device group from it; loop up to pld.world_size(), or over range(start,"
        " stop) with constants"
    ),
    ReasonCode.GROUP_PEER_OUTSIDE: "peer {peer} is outside the group of {view}, devices {devices}",
    ReasonCode.GROUP_RANK_OUTSIDE: "rank {rank} uses {view}, whose group is devices {devices}",
    ReasonCode.PARALLEL_SIGNAL: (
        "access memory and one of them notifies, waits or stores into an INT32 window (a"
        " signal cell it may be)"
    ),
    ReasonCode.PARALLEL_OVERLAP: "both access {memory} bytes {start}..{end} and one of them writes",
    ReasonCode.PARALLEL_ITERATIONS: (
        "iterations {first} and {second} of this pl.parallel {why} (at line {line}): PyPTO"
        " may run the iterations concurrently (docs/model.md), racecheck runs them one after"
        " another; use pl.range if they must be ordered"
    ),
    ReasonCode.SUMMARY_BODY_SYNCS: "its body has a {kind} at line {line}",
    ReasonCode.SUMMARY_LOOP_NOT_FOUND: "its loop statement is not found in the user's file",
    ReasonCode.SUMMARY_LOOP_OUTLIVES: "`{name}`, assigned in the loop, is read outside it",
    ReasonCode.SUMMARY_BRANCH_NOT_FOUND: "its statement is not found in the user's file",
    ReasonCode.SUMMARY_COUNTER_FORM: "the counter at line {line} has no symbolic form",
    ReasonCode.SUMMARY_BRANCH_OUTLIVES: "`{name}`, assigned under it, is read outside it",
    ReasonCode.WATCHDOG_OVERRUN: "did not finish within --timeout",
    ReasonCode.WATCHDOG_OVERRUN_AT: (
        "did not finish within --timeout; last line reached: {where} {text}"
    ),
    ReasonCode.DSL_NOT_MODELLED: "{module}.{name} is not part of the DSL racecheck models",
    ReasonCode.DSL_DRIVER_OBJECT: (
        "{name} is driver code that runs the program on hardware; racecheck does not model"
        " it inside a kernel or the host function"
    ),
    ReasonCode.DSL_DRIVER_CALL: (
        "{name} runs the program on hardware; racecheck never runs main() or the driver"
    ),
    ReasonCode.DSL_NEEDS_TORCH: (
        "this file computes with torch ({name} at line {line}); install torch"
    ),
    ReasonCode.DSL_RANK_ONLY: "{construct} is only modelled inside a per-rank kernel, not here",
    ReasonCode.DSL_HOST_ONLY: "{construct} is only modelled in the host entry's body",
    ReasonCode.DSL_RESULT_RANGE: (
        "`{text}` = {result} leaves the {dtype} range; the device wraps or is undefined"
        " there (docs/model.md), racecheck does not follow it"
    ),
    ReasonCode.DSL_HANDED_RANGE: (
        "`{value}` handed to the device leaves the {dtype} range; the device wraps or is"
        " undefined there (docs/model.md), racecheck does not follow it"
    ),
    ReasonCode.DSL_NOT_INTEGER: "expected an integer, got {value}",
    ReasonCode.DSL_SPLIT: (
        "pl.split({mode}) splits the region across vector sub-lanes, which racecheck does"
        " not model (docs/model.md §4); pl.split(pl.SplitMode.NONE) is accepted"
    ),
    ReasonCode.DSL_COPY_SIZES: (
        "{label}: {extent} elements of {source} do not fit {target_extent} of {target}"
    ),
    ReasonCode.DSL_WINDOW_ARGUMENT_SIZE: (
        "{function}() declares {name} with shape {declared}, {dtype} ({count} elements) but"
        " is passed {argument} with shape {shape}, {argument_dtype} ({argument_count}"
        " elements): racecheck does not model a window argument of another size than its"
        " parameter; pass a pld.window view of the declared shape"
    ),
    ReasonCode.REGION_NO_SOURCE: (
        "pl.at(level={level}) in the host function: racecheck reads the `with` statement"
        " from the source file and needs its body on lines of its own"
    ),
    ReasonCode.REGION_SHARED_WITH: (
        "the `with` statement at line {line} enters pl.at(level={level}) and other contexts:"
        " write each region as its own, nested `with` statement"
    ),
    ReasonCode.REGION_HOST_WORKER: "the pl.at(level=HOST, role=Worker) region at line {line}",
    ReasonCode.REGION_INLINE: (
        "pl.at(level={level}, role={role}) inline in the host function is not modelled;"
        " PyPTO outlines CHIP regions and HOST Worker regions there"
    ),
    ReasonCode.REGION_SPMD_NO_SOURCE: (
        "with pl.spmd(...): racecheck reads the `with` statement from the source file"
        " and needs its body on lines of its own"
    ),
    ReasonCode.REGION_TASK_REASSIGNS: (
        "the task at line {line} runs apart from its caller and assigns {name} a tensor other"
        " than the one it named before: racecheck cannot give it to the code after the task"
        " before the task runs"
    ),
    ReasonCode.REGION_TASK_ASSIGNS: (
        "{name} is assigned in the task at line {line}, which runs apart from its caller:"
        " racecheck cannot give its value to the code after the task before the task runs"
        " (pass it through a tensor)"
    ),
    ReasonCode.REGION_CHIP_WITHOUT_DEVICE: (
        "the pl.at(level=CHIP) region at line {line} is a CHIP orchestration the host calls"
        " without device=; racecheck models that in a one-device program only"
    ),
    ReasonCode.THREAD_TASK: "task {task}",
    ReasonCode.THREAD_BLOCK: "block {block} of {task}",
    ReasonCode.SCOPE_OUTSIDE_DEVICE: "{construct} is modelled in a per-device function only",
    ReasonCode.SCOPE_NOT_TASK_ID: "a pl.TASK_ID array holds task ids; got {value}",
    ReasonCode.SCOPE_SLOT_UNSET: (
        "slot {slot} of a pl.TASK_ID array is used before it is set: not modelled"
    ),
    ReasonCode.SCOPE_TASK_ID_ARGUMENT: (
        "kernel {kernel} is passed a task id: PyPTO's docs define task ids for deps= and"
        " orchestration code (pl.Scalar[pl.TASK_ID]), not as kernel arguments"
    ),
    ReasonCode.SCOPE_WRITES_LOCAL: (
        "task {task} writes its argument {argument}, a value local to its caller"
        " (pl.full, or pl.create_tensor outside a per-device function's own body):"
        " racecheck does not share it between tasks"
    ),
    ReasonCode.SCOPE_RESULTS_UNMATCHED: (
        "task {task} runs apart from its caller, and its {declared} declared "
        "result(s) are neither its {written} pl.Out/pl.InOut tensor(s) nor"
        " its {outs} pl.Out one(s): racecheck cannot give them to the"
        " caller before it runs"
    ),
    ReasonCode.SCOPE_DISPATCH_RESULTS: (
        "the host uses what dispatch {dispatch} returns, and its declared results are"
        " neither the pl.Out/pl.InOut tensors it writes nor its pl.Out ones:"
        " racecheck cannot tell which tensors they are"
    ),
    ReasonCode.SCOPE_RESULT_UNDECLARED: (
        "task {task} runs apart from its caller, and its caller uses its result,"
        " which the kernel declares nowhere (no pl.Out/pl.InOut argument, no return"
        " annotation): racecheck cannot give it to the caller before the task runs"
    ),
    ReasonCode.SCOPE_HELD_BACK: "<the result of task {task}, which runs apart from its caller>",
    ReasonCode.SCOPE_NO_DEP_IN_MANUAL: (
        "pl.no_dep(...) inside pl.manual_scope() is rejected by PyPTO"
    ),
    ReasonCode.SCOPE_SPMD_PREDICATE: "pl.spmd(predicate=...) is not modelled",
    ReasonCode.SCOPE_DEPS_NOT_IDS: (
        "deps= takes task ids (`with pl.at(...) as tid`, pl.submit's last result)"
        " or pl.TASK_ID arrays; got {dep}"
    ),
    ReasonCode.SCOPE_MANUAL_NESTED: "pl.manual_scope() cannot be nested (docs/model.md)",
    ReasonCode.SCOPE_AUTO_IN_MANUAL: (
        "pl.scope() (AUTO) inside a manual scope is rejected by PyPTO"
    ),
    ReasonCode.SCOPE_AUTO_OUTSIDE_OWN: (
        "pl.scope() (AUTO) is rejected by PyPTO outside a function declared with auto_scope=False"
    ),
    ReasonCode.ASYNC_SYNC_ID: (
        "pld.system.async_session(sync_id={sync_id}) needs 0..7: PyPTO rejects it"
    ),
    ReasonCode.ASYNC_NO_SESSION: (
        "{label} needs the session of pld.system.async_session(), got {session}"
    ),
    ReasonCode.ASYNC_NOT_PENDING: (
        "pld.system.wait_async_event needs a put_async event not yet drained, got {event}"
    ),
    ReasonCode.ASYNC_OTHER_SESSION: (
        "pld.system.wait_async_event drains the put_async at line {line} through another"
        " session than the one that issued it: the transfer is not drained"
    ),
    ReasonCode.ASYNC_WAIT_IN_FLIGHT: (
        "a wait at line {line} while the put_async at line {put} is in flight: racecheck"
        " places the transfer at its drain, which this wait could order; drain it before"
        " waiting"
    ),
    ReasonCode.ASYNC_TOUCH_IN_FLIGHT: (
        "line {line} touches bytes of the put_async at line {put} while it is in flight: the"
        " transfer may read or write them before or after; drain it first"
    ),
    ReasonCode.ASYNC_NEVER_DRAINED: (
        "the put_async at line {line} is never drained: call pld.system.wait_async_event on"
        " its event before the kernel ends"
    ),
    ReasonCode.PYPTO_REJECTS: "{why}: PyPTO rejects it",
    ReasonCode.COLLECTIVE_NRANKS: "{construct} needs a positive static int nranks=, got {nranks}",
    ReasonCode.COLLECTIVE_NRANKS_MESH: "{construct}: nranks= is for mode='ring' only",
    ReasonCode.LOWERING_RETURNS_AT_ONCE: (
        "line {line}: {why}: PyPTO's host kernel returns at once, doing nothing"
    ),
    ReasonCode.LOWERING_OP: "{label}: op= must be a pld.ReduceOp, got {op}",
    ReasonCode.LOWERING_RING_SIGNAL: (
        "{label}(mode='ring') needs a signal of {needed}, got {signal}"
    ),
    ReasonCode.LOWERING_RING_OPERANDS: (
        "{label}(mode='ring') needs Sum, FP32, a size divisible by {ranks} and a signal of"
        " at least {shape}; got {op}, {data}, {signal}"
    ),
    ReasonCode.LOWERING_UNFLUSHED: (
        "line {line}: {label}(mode='ring') moves chunks of {chunk} elements, not a multiple of"
        " {multiple}: PyPTO's host ring kernel may leave the last cache line of each chunk"
        " unflushed, a stale read the model (which assumes coherent memory) cannot show"
    ),
    ReasonCode.LOWERING_OUT_SHORT: "{label}: {out} does not hold all of {target}",
    ReasonCode.LOWERING_ROWS: "{label} needs {ranks} rows; got {target}",
    ReasonCode.BUILTIN_HOST_RANKS: (
        "{label} in the host function at {ranks} ranks: PyPTO's host kernels return at once"
        " above {most} ranks, with no synchronisation and no data"
    ),
    ReasonCode.BUILTIN_HOST_DTYPE: (
        "{label} in the host function on {data}: PyPTO's host kernel takes {dtypes} data only"
    ),
    ReasonCode.BUILTIN_IN_CHIP: (
        "{label} in a per-device (CHIP orchestration) function: PyPTO lowers only"
        " pld.tensor.all_to_all_v with both counts there and rejects it; call it in a"
        " kernel or in the host function"
    ),
    ReasonCode.BUILTIN_NOT_WINDOW: (
        "{label} in the host function needs windows, got {operand}: PyPTO rejects it"
    ),
    ReasonCode.BUILTIN_SAME_WINDOW: (
        "{label} in the host function needs distinct windows, got {operands}: PyPTO rejects it"
    ),
    ReasonCode.BUILTIN_SOURCE_IS_TARGET: (
        "{label}: {source} and {target} are views of one buffer; the builtin needs a source"
        " separate from its target"
    ),
    ReasonCode.BUILTIN_HOST_SIGNAL: (
        "{label} in the host function takes a [W] or [W, 1] signal, got {signal}:"
        " PyPTO refuses it at compile time"
    ),
    ReasonCode.BUILTIN_MODE: "{label}: mode={mode} is not 'mesh' or 'ring'",
    ReasonCode.BUILTIN_NO_SIGNAL_OFF_HOST: (
        "{label} without a signal is modelled in the host function only"
    ),
    ReasonCode.BUILTIN_NO_SIGNAL_AGAIN: (
        "{label} without a signal runs again from the same line: PyPTO rejects a"
        " signal-less allreduce inside a for/while loop; pass a signal window"
    ),
    ReasonCode.BUILTIN_DEFER: (
        "{label}(defer=True) is the three-argument InCore composite: PyPTO splits it"
        " inside a kernel's task, not in the host function or with an out tensor"
    ),
    ReasonCode.BUILTIN_LOCAL_WINDOW: (
        "{label} in a kernel needs a plain tensor as local data, got the window {local}:"
        " PyPTO's InCore lowering rejects it"
    ),
    ReasonCode.BUILTIN_SUM_ONLY: "{label} supports op=pld.ReduceOp.Sum only",
    ReasonCode.BUILTIN_OUT_ON_HOST: (
        "{label} with an out tensor is the InCore intrinsic, not a host call"
    ),
    ReasonCode.BUILTIN_KEYWORDS: (
        "{label} takes no {keywords}: its arguments are"
        " (input, target, signal, send_counts, recv_counts), and PyPTO refuses the call"
    ),
    ReasonCode.BUILTIN_COUNTS: (
        "{label} takes send_counts and recv_counts together (in the host function, always)"
    ),
    ReasonCode.PROMELA_MODEL: "racecheck model: {ranks} ranks, {events} events",
    ReasonCode.PROMELA_QUESTIONS: (
        "{asked} ordering questions: marker q_<n> reachable = answer yes"
    ),
    ReasonCode.PROMELA_DEADLOCK: "deadlock = invalid end state",
    ReasonCode.PROMELA_CELL: "{memory}[{owner}][{index}] at byte {offset}",
    ReasonCode.PROMELA_CAN_RUN: "can e{event} run?",
    ReasonCode.PROMELA_CAN_RUN_BEFORE: "can e{event} run before rank {rank} e{other}?",
    ReasonCode.PROMELA_INEXPRESSIBLE: (
        "a write into a signal cell that the model cannot express at {where}"
    ),
    ReasonCode.SPIN_NOT_ON_PATH: (
        "`{tool}` is not on PATH; install it with `apt-get install spin` (SPIN needs gcc too)"
    ),
    ReasonCode.SPIN_CANNOT_RUN: (
        "cannot run {tool}: {why}; install it with `apt-get install spin` (SPIN needs gcc too)"
    ),
    ReasonCode.SPIN_NO_TIME_LEFT: "SPIN ran out of time before {step}",
    ReasonCode.SPIN_TIMED_OUT: "SPIN did not finish in time (during {step})",
    ReasonCode.SPIN_STEP_FAILED: "{step} failed (exit {status}): {output}",
    ReasonCode.SPIN_NOT_EXHAUSTIVE: "SPIN's search was not exhaustive ({sign})",
    ReasonCode.SPIN_UNEXPECTED_OUTPUT: "unexpected pan output: {output}",
    ReasonCode.SPIN_UNREADABLE_OUTPUT: "cannot read {pattern!r} from pan's output",
}

Fact = str | int


class Reason(str):
    """A reason's words, with the code and facts they were made from."""

    code: ReasonCode
    facts: Mapping[str, Fact]

    def __new__(cls, code: ReasonCode, facts: Mapping[str, Fact]) -> Reason:
        made = super().__new__(cls, _WORDS[code].format_map(facts))
        made.code = code
        made.facts = MappingProxyType(dict(facts))
        return made

    def __reduce__(self) -> tuple[object, ...]:  # across worker processes
        return (_rebuilt, (self.code, dict(self.facts)))


def _rebuilt(code: ReasonCode, facts: dict[str, Fact]) -> Reason:
    return Reason(code, facts)


def reason(code: ReasonCode, **facts: Fact) -> Reason:
    return Reason(code, facts)


def has_code(text: str, code: ReasonCode) -> bool:
    """Whether `text` is a reason of `code` (never decided by its words)."""
    return isinstance(text, Reason) and text.code is code
