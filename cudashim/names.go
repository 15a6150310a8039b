package cudashim

// BackendName is the name under which the backend registers: "cuda".
const BackendName = "cuda"
