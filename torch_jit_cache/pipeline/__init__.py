"""The compile pipeline: the cache-miss callback (convert_frame), the transformed code (codegen)
and the on-disk cache of compiled entries (disk_cache/)."""
