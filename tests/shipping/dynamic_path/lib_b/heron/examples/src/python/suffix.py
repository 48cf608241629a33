SUFFIX = "-shipped"
