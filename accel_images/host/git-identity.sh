#!/bin/sh
# The devcontainer's initializeCommand (accel_images/host/session.py), run on the host before the container
# starts: the user's git name and e-mail, nothing else, into "$HOME/$1/config", which the container mounts
# read-only and git includes. Never fails the start: a user without a git identity gets an empty file.
dir="$HOME/$1"
mkdir -p "$dir" && : >"$dir/config" &&
    for key in user.name user.email; do
        value="$(git config --get "$key")" && git config --file "$dir/config" "$key" "$value"
    done
exit 0
