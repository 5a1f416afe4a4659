"""Isolated git workspaces for runs, and their results as new branches and patches.

The user's repository is only ever *read*, except for two additive writes: new objects in
its object store and new refs under `refs/heads/` (created, never moved). Its working
tree, index, HEAD, stash, config, hooks and existing branches are never touched, and no
`git worktree` bookkeeping is written into its `.git`.

How a workspace is laid out (for a run named `N` under `root`):

    root/N/            the work tree the agent sees; `root/N/.git` is a fresh repository whose
                       `objects/info/alternates` points at the base's object store (below)
                       and whose HEAD is the base commit, detached
    root/.N.runner/    runner-private: `git/` (a pristine bare repository holding only our
                       own config) and `index`, never shown to the agent
    root/.objects/K/   one pack of exactly the objects the base commit reaches, made once
                       per repository and base and shared by the runs on them; the sandbox
                       mounts it read-only, so a run finds neither the results of the
                       runs before it nor anything else of the user's store, and no mount
                       source names the user's repository

`root` and every folder the runner makes in it are mode 0700: a root runner's commands
all run as one user, and these modes keep them out of other batches' runs.

Every git command the runner itself runs on a workspace uses the *private* git dir, reading
the user's object store (as `GIT_OBJECT_DIRECTORY`, or through alternates while a result
is staged in the private store; `publish`). So:
- nothing the agent writes into `root/N/.git` (hooks, `core.fsmonitor`, filter drivers,
  `core.worktree`, `commit.gpgSign`/`gpg.program`, a doctored index) is ever read by the
  runner's own git;
- the result commit's objects are moved into the user's object store as packs: there is
  no fetch, so no `upload-pack` runs in an agent-controlled repository, and no loose
  objects pile up there;
- the result depends only on the work tree's content and our fixed config (no user
  `core.autocrlf`, `format.*`, `diff.noprefix` or filter drivers).

Why this and not `git worktree add` or `git clone`: `bench/workspace.py`, a generated
repository of 5,000 files (packed), 2 CPUs, git 2.39, median of 10 runs taken round-robin:

    setup of one workspace      tmpfs (/dev/shm)   this VM's ext4 disk
    worktree add --detach        102-119 ms          2.46 s
    clone --shared + checkout    102-127 ms          2.33 s
    clone --local + checkout     104-125 ms          2.31 s
    this module's prepare        112-143 ms          2.25 s   (incl. an 11-15 ms dirty check)

The first run on a repository and base also makes the pack of the objects the base
reaches: 36 ms (14-18 ms of CPU) for these 5,000 files, once per batch; the runs after it
reuse the pack.

Writing 5,000 files is the whole cost and the same for every strategy, so the choice is
made on safety:
- `git worktree add` writes `.git/worktrees/<name>` into the user's repository and shares
  its refs, config and hooks with the agent (an agent's `git branch -f main` would move
  the user's branch), and runs the user's `post-checkout` hook unless disabled.
- `git clone --shared` copies every ref of the user's repo and leaves an `origin` remote
  pointing at it (an agent could push into the user's repo); `--local` also hardlinks
  objects. Both would then need a fetch back, running `upload-pack` in the agent's repo.
- init + alternates + `read-tree -u` does the same checkout with no refs, no remote, and a
  private index we keep.

`finish` (commit + patch + branch, 13 files changed) takes 136-172 ms (104-120 ms CPU);
with nothing changed 70-110 ms. Most of it is `git add` re-hashing files that were checked
out in the same second as the index was written (git's "racily clean" rule, which this
git build applies at one-second granularity); trusting those stat data instead could miss
an edit made within that second, so the cost stays.

GitPython is deliberately not used for running git: `git.Git.execute` builds the child
environment from a copy of `os.environ` and cannot drop an inherited `GIT_DIR`,
`GIT_INDEX_FILE` or `GIT_CONFIG_PARAMETERS` (present when the runner is started from a git
hook or `git rebase -x`; any of them would redirect our commands at the user's index), and
`import git` costs ~100 ms of start-up. Commands are plain argv lists run by `subprocess`
with an environment built from scratch (`git_env`).

Hardening of every git call (see `HARDENING` and `git_env`): hooks off
(`core.hooksPath=/dev/null`), `core.fsmonitor=false`, no system or global config, no
pager/editor/askpass/credential helpers, no signing programs, no auto-gc, only the `file`
transport (plus network transports for `push`), no replace refs, no external diff or
textconv, and filter drivers (clean/smudge/process) blanked wherever the user's own
config is read.
"""

from runner.errors import GitError, WorkspaceError
from runner.workspace.finish import finish, finish_sync, make_branch, parse_raw_numstat
from runner.workspace.git import (
    DEFAULT_FORBIDDEN,
    HARDENING,
    IDENTITY,
    config_env,
    git_env,
)
from runner.workspace.names import branch_name, check_scope
from runner.workspace.prepare import check_base, prepare, prepare_sync
from runner.workspace.refs import (
    ReflogEntry,
    branch_tip,
    checked_out_branches,
    cleanup,
    cleanup_sync,
    commit_identity,
    delete_branch,
    delete_branch_at,
    delete_branch_sync,
    fetch_detached_sync,
    has_path_at,
    is_branch_name,
    push,
    push_sync,
    reflog,
    remote_tip,
    run_trailers,
    swap_branch_sync,
)
from runner.workspace.types import FileChange, PushResult, Result, Scope, Workspace

__all__ = [
    "DEFAULT_FORBIDDEN",
    "HARDENING",
    "IDENTITY",
    "FileChange",
    "GitError",
    "PushResult",
    "ReflogEntry",
    "Result",
    "Scope",
    "Workspace",
    "WorkspaceError",
    "branch_name",
    "branch_tip",
    "checked_out_branches",
    "commit_identity",
    "fetch_detached_sync",
    "has_path_at",
    "is_branch_name",
    "check_base",
    "check_scope",
    "cleanup",
    "cleanup_sync",
    "config_env",
    "delete_branch",
    "delete_branch_at",
    "delete_branch_sync",
    "finish",
    "finish_sync",
    "make_branch",
    "git_env",
    "parse_raw_numstat",
    "prepare",
    "prepare_sync",
    "push",
    "push_sync",
    "reflog",
    "remote_tip",
    "run_trailers",
    "swap_branch_sync",
]
