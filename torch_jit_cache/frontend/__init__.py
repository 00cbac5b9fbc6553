"""The user's face below `api`: what a user marks, wraps and sets (compiled modules, explain's
result, stances, dynamic marks, allow_in_graph, trace rules); every layer that compiles reads it."""
