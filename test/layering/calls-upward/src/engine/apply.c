int apply_all(void);

int
apply_all(void)
{
	return 1;
}
