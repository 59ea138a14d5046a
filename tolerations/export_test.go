package tolerations

// ParseDecimalInt64 exposes parseDecimalInt64 to the external tests, which
// prove it equivalent to content.IsDecimalInteger followed by strconv.ParseInt.
var ParseDecimalInt64 = parseDecimalInt64
