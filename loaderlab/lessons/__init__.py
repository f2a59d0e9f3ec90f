"""One notebook's helpers each: `mNN_<topic>` serves notebook NN (and says so when a later notebook reuses it).

These are not an API: exercises, graders and solutions never import them, so a lesson can change its
helpers without touching a planted folder or a stub. What two audiences need lives in `loaderlab` itself.
"""
