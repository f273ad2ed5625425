#!/bin/bash
# The login user's home directory and name, one a line.
printf "%s\n%s\n" "$HOME" "$(id -un)"
