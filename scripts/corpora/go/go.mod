module uzswap.example/mapservice

go 1.21
