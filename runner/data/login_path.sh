# Read by bash through BASH_ENV in an unsandboxed (danger-full-access) command: see
# runner/sandbox/env.py, `keep_login_path`. A login shell (`bash -lc`) has by now run
# /etc/profile, which resets PATH, and the user's own profile; the runner's PATH goes back
# in front, so the agent finds the tools the check finds. Other shells are left alone.
if [ -n "${RUNNER_BASH_ENV-}" ]; then
  # shellcheck source=/dev/null
  . "$RUNNER_BASH_ENV"
fi
if shopt -q login_shell 2>/dev/null && [ -n "${RUNNER_LOGIN_PATH-}" ]; then
  PATH="$RUNNER_LOGIN_PATH${PATH:+:$PATH}"
  export PATH
fi
